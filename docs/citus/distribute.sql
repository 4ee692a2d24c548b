-- What docs/scaling.md#measured-on-citus-1322 ran, after migrations/*.sql on a Citus 13.2.2
-- coordinator with two workers, to distribute every table; it completed in 0.9 s on empty
-- tables. Not a migration: it runs once (a second run stops at the first `drop constraint`),
-- and split_part(id, '@', 1) only stands for whatever derives the wallet group from an account
-- id. Follow it with check_new_entries_per_shard.sql.
\set ON_ERROR_STOP 1
set citus.enable_unsafe_triggers = on;
-- Foreign keys whose columns lack the shard key: dropped, re-added with it below.
alter table transactions drop constraint transactions_reverses_fkey;
alter table open_holds drop constraint open_holds_transaction_id_fkey;
alter table open_holds drop constraint open_holds_account_id_fkey;
alter table account_checkpoints drop constraint account_checkpoints_account_id_fkey;
alter table webhook_deliveries drop constraint webhook_deliveries_event_id_fkey;
alter table webhook_deliveries drop constraint webhook_deliveries_subscription_id_fkey;
alter table delivery_attempts drop constraint delivery_attempts_delivery_id_fkey;
alter table audit_log drop constraint audit_log_key_id_fkey;
-- The shard key: a function of the account id where a row has one (a check, as Citus refuses a
-- generated distribution column), so (shard_key, id) stays as unique as id; given otherwise.
alter table accounts add column shard_key text not null check (shard_key = split_part(id, '@', 1));
alter table accounts drop constraint accounts_pkey, add primary key (shard_key, id);
alter table entries add column shard_key text not null check (shard_key = split_part(account_id, '@', 1));
alter table entries drop constraint entries_pkey, add primary key (shard_key, id);
alter table entries drop constraint entries_account_id_sequence_key,
    add unique (shard_key, account_id, sequence);
alter table open_holds add column shard_key text not null check (shard_key = split_part(account_id, '@', 1));
alter table open_holds drop constraint open_holds_pkey, add primary key (shard_key, transaction_id, account_id);
alter table account_checkpoints add column shard_key text not null check (shard_key = split_part(account_id, '@', 1));
alter table account_checkpoints drop constraint account_checkpoints_pkey,
    add primary key (shard_key, account_id, below_xid);
alter table transactions add column shard_key text not null;
alter table transactions drop constraint transactions_pkey, add primary key (shard_key, id);
alter table transactions drop constraint transactions_seq_key, add unique (shard_key, seq);
alter table outbox_events add column shard_key text not null;
alter table outbox_events drop constraint outbox_events_pkey, add primary key (shard_key, id);
alter table outbox_events drop constraint outbox_events_seq_key, add unique (shard_key, seq);
alter table webhook_deliveries add column shard_key text not null;
alter table webhook_deliveries drop constraint webhook_deliveries_pkey, add primary key (shard_key, id);
alter table webhook_deliveries drop constraint webhook_deliveries_seq_key, add unique (shard_key, seq);
alter table webhook_deliveries drop constraint webhook_deliveries_event_id_subscription_id_key,
    add unique (shard_key, event_id, subscription_id);
alter table delivery_attempts add column shard_key text not null;
alter table delivery_attempts drop constraint delivery_attempts_pkey, add primary key (shard_key, id);
-- Distributed tables first: a reference table created earlier turns every plain table that has
-- a foreign key to it into a Citus local table, which can then never be distributed because of
-- its identity column.
select create_distributed_table('accounts', 'shard_key');
select create_distributed_table('transactions', 'shard_key', colocate_with => 'accounts');
select create_distributed_table('entries', 'shard_key', colocate_with => 'accounts');
select create_distributed_table('open_holds', 'shard_key', colocate_with => 'accounts');
select create_distributed_table('account_checkpoints', 'shard_key', colocate_with => 'accounts');
select create_distributed_table('outbox_events', 'shard_key', colocate_with => 'accounts');
select create_distributed_table('webhook_deliveries', 'shard_key', colocate_with => 'accounts');
select create_distributed_table('delivery_attempts', 'shard_key', colocate_with => 'accounts');
select create_reference_table('webhook_subscriptions');
select create_reference_table('api_keys');
alter table transactions add foreign key (shard_key, reverses) references transactions (shard_key, id);
alter table open_holds add foreign key (shard_key, account_id) references accounts (shard_key, id);
alter table open_holds add foreign key (shard_key, transaction_id) references transactions (shard_key, id);
alter table account_checkpoints add foreign key (shard_key, account_id) references accounts (shard_key, id);
alter table webhook_deliveries add foreign key (shard_key, event_id) references outbox_events (shard_key, id);
alter table webhook_deliveries add foreign key (subscription_id) references webhook_subscriptions (id);
alter table delivery_attempts add foreign key (shard_key, delivery_id) references webhook_deliveries (shard_key, id);
alter table audit_log add foreign key (key_id) references api_keys (id);
