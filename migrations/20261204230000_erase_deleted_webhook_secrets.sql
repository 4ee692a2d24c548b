-- A deleted webhook subscription keeps no secret: its `secrets` are emptied and the secret in
-- its stored creation answer is blanked on delete, so neither a read nor a replayed create
-- can recover it. The stored creation request keeps only a digest of a caller-chosen secret
-- (enough to tell a retry from another request).
alter table webhook_subscriptions drop constraint webhook_subscriptions_secrets_check;
alter table webhook_subscriptions add constraint webhook_subscriptions_secrets_check
    check (cardinality(secrets) between 1 and 2
           or (status = 'deleted' and cardinality(secrets) = 0));

update webhook_subscriptions
set secrets = '{}',
    creation_response = regexp_replace(creation_response, '"secret":"[^"]*"', '"secret":null')
where status = 'deleted';

update webhook_subscriptions
set creation_request = jsonb_set(creation_request, '{secret}', to_jsonb(
        'sha256:' || encode(sha256(convert_to(creation_request ->> 'secret', 'UTF8')), 'hex')))
where creation_request ->> 'secret' is not null
  and creation_request ->> 'secret' not like 'sha256:%';
