-- 0006_client_tools: the tools a run's caller executes (AG-UI's input
-- tools), [{name, description, parameters}], NULL when none. Which calls of
-- an assistant message are the caller's is a "client" flag in
-- messages.tool_calls, which needs no column. ADD COLUMN without a default
-- rewrites no rows.
ALTER TABLE runs ADD COLUMN client_tools JSONB;
