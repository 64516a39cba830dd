-- 0007_client_tools: the tools a run's caller executes (AG-UI's input
-- tools), JSON [{name, description, parameters}], NULL when none. Which
-- calls of an assistant message are the caller's is a "client" flag in
-- messages.tool_calls' JSON, which needs no column. messages.decision marks
-- a text decision, which a model is not shown; existing rows read as not
-- one (a model was shown them before).
ALTER TABLE runs ADD COLUMN client_tools TEXT;
ALTER TABLE messages ADD COLUMN decision INTEGER NOT NULL DEFAULT 0;
