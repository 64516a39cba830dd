-- 0006_client_tools: the tools a run's caller executes (AG-UI's input
-- tools), [{name, description, parameters}], NULL when none. Which calls of
-- an assistant message are the caller's is a "client" flag in
-- messages.tool_calls, which needs no column. messages.decision marks a
-- text decision, which a model is not shown; existing rows read as not one
-- (a model was shown them before). ADD COLUMN without a default, or with a
-- constant one, rewrites no rows.
ALTER TABLE runs ADD COLUMN client_tools JSONB;
ALTER TABLE messages ADD COLUMN decision BOOLEAN NOT NULL DEFAULT false;
