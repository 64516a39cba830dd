package sqlitestore

import (
	"testing"

	migfiles "github.com/countersign/countersign/internal/migrations"
)

// applied pins the SHA-256 of every released migration. Databases in the
// field have run these files; editing one would leave them with a schema no
// build describes. Change the schema with a new file, and add its sum here.
var applied = map[string]string{
	"0001_init.sql":                "dd28809a7405e95c3de5e6d689b4aa2354732523782751d42a46846d78ae1684",
	"0002_claimed_from.sql":        "063def7eaaa92a0a9f937bf1dcf95b73612acf5f4212b29a2b21ece4fdebfd03",
	"0003_list_pending.sql":        "f9b693f7530037d7ae2f3a89bd38a7e062134c6255bd77910df91c9001a386e4",
	"0004_sessions.sql":            "ae35b94c1f0aa77722e993ef5b43c31f19b37d6582b7176da0a1ca6f992c0652",
	"0005_rule_fingerprint.sql":    "376f7b6de8101451cd3fd04c477c32b3c551a55c90f9d981f88abd4547018d55",
	"0006_runs.sql":                "947c46ae09eabefa13e91486f7c8d2f803eafe43c1f5d8bc8df4b6c093a6a281",
	"0009_escalation.sql":          "af390b02fd843661cfcd1eb6a7439f72863471400c29c5cbddd7151f5515c66d",
	"0007_client_tools.sql":        "597b62df7abc48e5598898e5011c127d530a76feecd828531654189d45e8fa3a",
	"0008_notifications.sql":       "a80ff8ac047c0d3d2091221189123990706c270288e324be528017fb04acfc41",
	"0010_audit_chain.sql":         "19ee777b31d6fe0c6322079e1cab57378e960e0e84b012c2a814f0bfd644cd47",
	"0011_rule_applied.sql":        "2d8cd6ada74c503558e785142fe1349480b146cf4ebe92ffcff8e3ef494880d9",
	"0012_audit_chain_table.sql":   "9c7b771f0f110fa096890b89632ea757675523978bb8adaaa59397575582d712",
	"0013_audit_chain_blocks.sql":  "3de3b0758ceb12f60c3d49bab7e0e24e9fc3393ab47205e6d6eb13f522992bad",
	"0014_credential_kinds.sql":    "46dd1cb4026ce5aa075e642c4c3112de9eb2a9ff0ca0813dd00cf56e70e4b0bc",
	"0015_audit_checkpoints.sql":   "151ea801ab9b7a8048a29c5ed91d3906f6cf5e37cad6413e3c953b1e8aae44be",
	"0016_message_keys.sql":        "2f15477c7bbe4fc7b689fd682b1011a4a46623b628299031507f81f129f8d91f",
	"0017_event_actor_kind.sql":    "74e74e2ddaf825dbaae14e76a8642543d86f345639d9089f3b417454093e3dcb",
	"0018_approver_channels.sql":   "8328ad02be0da0c034d3a9abbf892ff0efb3293d7dd2acc22b471ed4a8cd37f8",
	"0019_slack_announcements.sql": "6ac824ce58accb0d8387d0077f2b65d53bf4b4937fc2871d848b53988ef73a32",
	"0020_email_links.sql":         "d18a3dec1de3466c43a95f7bb1396e18954c48312c126372d364a5d1a761150d",
	"0021_passkeys.sql":            "a96c633c45e553957561c510033fcb324b273247592049fa59f8d8f004af6842",
	"0022_trace_parent.sql":        "9041dad5193b9e71f9bffd50511bdffc0ad565639de41b31eec9f7df3a8569d1",
	"0023_mcp_nonces.sql":          "2ff2202dd5d27f700b75881637a8bc693ff9ba0b163da6d0706c49349789d7c8",
}

func TestMigrationsUnchanged(t *testing.T) {
	t.Parallel()
	files, err := migfiles.Load(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if LatestSchemaVersion() != len(files) {
		t.Errorf("LatestSchemaVersion = %d, want %d", LatestSchemaVersion(), len(files))
	}
	for _, p := range migfiles.CheckPinned(files, applied) {
		t.Error(p)
	}
}
