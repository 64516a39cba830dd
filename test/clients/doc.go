// Package clients tests Countersign's HTTP contract the way its users'
// clients meet it, with tools nobody here wrote: Redocly and Spectral lint
// the OpenAPI document, openapi-typescript generates types from the served
// /openapi.json that tsc --strict compiles the README's calls and every
// request body against through openapi-fetch, and the npm eventsource
// client follows the event stream across a restart of a real server.
//
// The npm packages are pinned by package-lock.json in this folder and
// installed with npm ci (the Makefile does it; a test does it too when
// node_modules is missing or out of date). Without node the tests skip,
// except in CI (CI set), where they fail.
package clients
