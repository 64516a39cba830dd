-- 0020_mcp_nonces: the spent nonces of the MCP gateway's request states
-- (2026-07-28 in-band approvals), each kept until its state's deadline so
-- that a state decides once, in whichever process it is presented.
CREATE TABLE mcp_nonces (
    tenant   TEXT COLLATE "C" NOT NULL,
    nonce    TEXT COLLATE "C" NOT NULL,
    until_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant, nonce)
);

CREATE INDEX mcp_nonces_until ON mcp_nonces (until_at);
