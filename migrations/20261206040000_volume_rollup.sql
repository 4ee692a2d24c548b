-- The dashboard's volumes (`GET /v1/stats/volumes`, src/stats/): per minute and currency, the
-- posted transactions (how many, and their amount: the captured amount, else the sum of the
-- credits) by ledger time (`posted_at`), and the refusals by creation time. A minute is rolled
-- up once it is final: before the finality horizon (the start of the oldest open writer), no
-- transaction can still commit with a `posted_at` or `created_at` in it, and neither time
-- changes once written, so a rolled-up row is never wrong later. The read answers what is not
-- rolled up yet from `transactions` through the two partial indexes below, never from entries.
-- On Citus both tables stay plain tables on the coordinator, like every table distribute.sql
-- does not name; a roll-forward's INSERT ... SELECT pulls the shards' aggregates to it.
create table volume_minutes (
    minute        timestamptz not null check (minute = date_trunc('minute', minute)),
    currency      text not null check (currency ~ '^[A-Z]{3}$'),
    posted_count  bigint not null check (posted_count >= 0),
    posted_amount bigint not null check (posted_amount >= 0),
    refused_count bigint not null check (refused_count >= 0),
    primary key (minute, currency)
);

-- The minutes in [rolled_from, rolled_until) are in volume_minutes (a minute without
-- transactions has no row); one row. The rollup covers the longest window (a day back from its
-- hour) and drops older minutes as it moves on: it holds about a day, and a ledger with years
-- of history is never rolled up whole.
create table volume_rollup (
    only_row     boolean primary key default true check (only_row),
    rolled_from  timestamptz not null,
    rolled_until timestamptz not null check (rolled_until >= rolled_from)
);

-- Posted transactions by ledger time, refusals by creation time: the live tail past the
-- rollup (a minute or two) and each roll-forward read a time range of these, not the table.
create index transactions_posted_at on transactions (posted_at) where status = 'posted';
create index transactions_refused_at on transactions (created_at) where status = 'rejected';
