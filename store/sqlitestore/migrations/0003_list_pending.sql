-- 0003_list_pending: the inbox's listing, pending proposals newest first,
-- reads only pending rows. Without it, a page of pending proposals walks
-- proposals_list through every settled row newer than the page's last
-- (about 30 settled rows per pending one in a store where 3 % are pending),
-- or sorts every pending row. ListProposals writes a single known status
-- into its query as a literal: SQLite uses a partial index only for a query
-- whose WHERE clause contains the index's term.
CREATE INDEX proposals_pending ON proposals (tenant, created_at DESC, id DESC)
    WHERE status = 'pending';
