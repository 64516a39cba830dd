-- 0002_list_pending: the inbox's listing, pending proposals newest first,
-- reads only pending rows. Without it, a page of pending proposals walks
-- proposals_list through every settled row newer than the page's last
-- (about 30 settled rows per pending one in a store where 3 % are pending),
-- or reads every pending row through proposals_expiry and sorts them.
-- ListProposals writes a single known status into its query as a literal,
-- so that even a generic plan of the prepared statement can prove the
-- index's predicate.
CREATE INDEX proposals_pending ON proposals (tenant, created_at DESC, id DESC)
    WHERE status = 'pending';
