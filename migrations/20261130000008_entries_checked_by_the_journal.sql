-- An entry's account and transaction are checked once, by the journal trigger, not also by two
-- foreign keys.
--
-- Why: the journal trigger (20261130000006) already probes each new entry's account and
-- transaction by primary key, and refuses the statement when either is missing or does not fit
-- (currency, status, wallet chain). The foreign keys ran the same two probes again, one
-- row-level trigger query per entry each, and also locked every referenced account and
-- transaction row (FOR KEY SHARE). In the benchmark they were a third of an entries insert's
-- time (0.62 of 1.85 ms for a group of about 24 entries).
--
-- What the foreign keys also gave is that a referenced row cannot be deleted. A ledger never
-- deletes an account or a transaction, so both tables now refuse DELETE and TRUNCATE outright,
-- which is stronger: not even an account without entries goes.
create function refuse_ledger_row_delete() returns trigger language plpgsql as $$
begin
    raise exception '% rows are immutable history, never deleted: % refused', tg_table_name, tg_op
        using errcode = 'integrity_constraint_violation';
end $$;
create trigger accounts_never_deleted before delete on accounts
    for each row execute function refuse_ledger_row_delete();
create trigger accounts_no_truncate before truncate on accounts
    for each statement execute function refuse_ledger_row_delete();
create trigger transactions_never_deleted before delete on transactions
    for each row execute function refuse_ledger_row_delete();
create trigger transactions_no_truncate before truncate on transactions
    for each statement execute function refuse_ledger_row_delete();

alter table entries
    drop constraint entries_account_id_fkey,
    drop constraint entries_transaction_id_fkey;
