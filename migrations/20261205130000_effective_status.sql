-- What a transaction's status reads as at an instant: a pending hold past its expiry is
-- `expired`, whether or not the sweeper has marked it yet. The one definition every statement
-- that reads a status uses (docs/architecture.md, "Effective status"), instead of the same
-- CASE written at each read. The instant is the caller's, and deliberately one of two clocks:
-- `now()` (the transaction's start) for reads, `clock_timestamp()` under a hold's locks for
-- its capture, so that a capture can never be overtaken by a writer that already spent what
-- the expired hold reserved. A single-expression immutable SQL function: the planner inlines
-- it, so a predicate on it uses the indexes the CASE did.
create function hold_status_at(status text, expires_at timestamptz, at timestamptz)
returns text language sql immutable parallel safe as $$
    select case when status = 'pending' and expires_at <= at then 'expired' else status end
$$;
