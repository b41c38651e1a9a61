-- Bug: the message is deleted by its id, whoever holds it: no receipt asked for.
-- leasecheck: name=visibility-delete-by-id

-- name: complete
-- Delete the message if it is in flight.
-- leasecheck: accepted=first_column_true
with deleted as (
    update messages set status = 'deleted', receiver = null
     where msg_id = %(id)s and status = 'inflight'
    returning msg_id
)
select exists (select from deleted)
