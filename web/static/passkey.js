// Countersign inbox: passkey ceremonies (docs/passkeys.md). A form marked
// data-passkey needs a passkey's answer before it is sent: this script
// fetches the ceremony's options from the inbox (the engine makes and
// binds every challenge), runs navigator.credentials, puts the answer's
// JSON in the form's hidden field and sends the form. The form's POST is
// what enrols, removes or approves; the engine checks the answer.
"use strict";
(function () {
  // base64url <-> ArrayBuffer: WebAuthn's options and answers carry bytes,
  // their JSON carries base64url without padding.
  function toBuf(s) {
    s = String(s).replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) s += "=";
    var bin = atob(s), b = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
    return b.buffer;
  }
  function toB64(buf) {
    var b = new Uint8Array(buf), s = "";
    for (var i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function descriptors(list) {
    return (list || []).map(function (c) { return Object.assign({}, c, { id: toBuf(c.id) }); });
  }
  // creation and request are the options navigator.credentials takes, from
  // their JSON form.
  function creation(o) {
    return Object.assign({}, o, {
      challenge: toBuf(o.challenge),
      user: Object.assign({}, o.user, { id: toBuf(o.user.id) }),
      excludeCredentials: descriptors(o.excludeCredentials)
    });
  }
  function request(o) {
    return Object.assign({}, o, { challenge: toBuf(o.challenge), allowCredentials: descriptors(o.allowCredentials) });
  }
  // answer is a credential's JSON, as PublicKeyCredential.toJSON() makes it.
  function answer(c) {
    var r = c.response, out = {
      id: c.id, rawId: toB64(c.rawId), type: c.type,
      clientExtensionResults: c.getClientExtensionResults ? c.getClientExtensionResults() : {},
      response: { clientDataJSON: toB64(r.clientDataJSON) }
    };
    if (c.authenticatorAttachment) out.authenticatorAttachment = c.authenticatorAttachment;
    if (r.attestationObject) {
      out.response.attestationObject = toB64(r.attestationObject);
      if (r.getTransports) out.response.transports = r.getTransports();
    } else {
      out.response.authenticatorData = toB64(r.authenticatorData);
      out.response.signature = toB64(r.signature);
      if (r.userHandle) out.response.userHandle = toB64(r.userHandle);
    }
    return JSON.stringify(out);
  }

  // post sends fields (and the form's CSRF token) to a JSON route of the
  // inbox and returns its answer; a refusal throws its message.
  function post(form, url, fields) {
    var body = new URLSearchParams(fields || {});
    body.set("csrf", form.elements.csrf.value);
    return fetch(url, {
      method: "POST", credentials: "same-origin", body: body,
      headers: { "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json" }
    }).then(function (r) {
      var json = (r.headers.get("Content-Type") || "").indexOf("application/json") === 0;
      if (!json) throw new Error("The inbox did not answer (" + r.status + "). Reload the page and try again.");
      return r.json().then(function (j) {
        if (!r.ok) throw new Error(j.message || "Refused (" + r.status + ").");
        return j;
      });
    });
  }
  function create(opts) { return navigator.credentials.create({ publicKey: creation(opts.publicKey) }); }
  function get(opts) { return navigator.credentials.get({ publicKey: request(opts.publicKey) }); }

  function say(msg) {
    var p = document.getElementById("passkey-problem");
    if (!p) { window.alert(msg); return; }
    p.textContent = msg;
    p.hidden = !msg;
  }
  function words(e) {
    if (e && e.name === "NotAllowedError") return "The passkey prompt was cancelled or timed out. Nothing was changed.";
    if (e && e.name === "InvalidStateError") return "This device holds one of your passkeys already. Nothing was changed.";
    return (e && e.message) || "The passkey could not be used. Nothing was changed.";
  }

  // The ceremonies, by the form's data-passkey: each resolves to the name
  // and value of the hidden field to fill.
  var ceremonies = {
    enroll: function (form) {
      return post(form, form.getAttribute("data-begin")).then(create)
        .then(function (c) { return ["attestation", answer(c)]; });
    },
    add: function (form) {
      return post(form, "/passkeys/challenge").then(get)
        .then(function (c) { return post(form, "/passkeys/add/begin", { assertion: answer(c) }); })
        .then(create)
        .then(function (c) { return ["attestation", answer(c)]; });
    },
    remove: function (form) {
      return post(form, "/passkeys/challenge").then(get)
        .then(function (c) { return ["assertion", answer(c)]; });
    },
    "step-up": function (form) {
      return post(form, form.getAttribute("data-begin")).then(get)
        .then(function (c) { return ["assertion", answer(c)]; });
    }
  };

  var busy = false;
  document.addEventListener("submit", function (ev) {
    var form = ev.target, kind = form.getAttribute && form.getAttribute("data-passkey");
    if (!kind || !ceremonies[kind]) return;
    // A step-up is for approvals only: a rejection needs none.
    var submitter = ev.submitter;
    if (kind === "step-up" && !(submitter && submitter.name === "verdict" && submitter.value === "approved")) return;
    var field = kind === "enroll" || kind === "add" ? "attestation" : "assertion";
    if (form.elements[field] && form.elements[field].value) return; // the answer is in: send it
    ev.preventDefault();
    if (busy) return;
    if (!window.PublicKeyCredential || !navigator.credentials) {
      say("This browser does not support passkeys. Use one that does.");
      return;
    }
    busy = true;
    say("");
    if (submitter) submitter.disabled = true;
    var id = form.id, reason = form.elements.reason && form.elements.reason.value;
    ceremonies[kind](form).then(function (got) {
      // The live page may have replaced the form meanwhile: send the one
      // shown now, with what was typed.
      var cur = (id && document.getElementById(id)) || form;
      var button = submitter && submitter.id ? document.getElementById(submitter.id) : submitter;
      if (!cur.isConnected || (submitter && (!button || !cur.contains(button)))) {
        throw new Error("The proposal changed meanwhile. Nothing was sent; read it again, then decide.");
      }
      cur.elements[got[0]].value = got[1];
      if (reason && cur.elements.reason) cur.elements.reason.value = reason;
      busy = false;
      if (button) button.disabled = false;
      cur.requestSubmit(button || undefined);
    }).catch(function (e) {
      busy = false;
      if (submitter) submitter.disabled = false;
      say(words(e));
    });
  });
})();
