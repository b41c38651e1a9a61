-- Bug: the visibility change is fenced on the receiver's name, not on the receipt.
-- leasecheck: name=visibility-heartbeat-by-receiver

-- name: heartbeat
-- Change the visibility timeout if this worker received the message.
-- leasecheck: accepted=rowcount
update messages set visible_at = now() + %(lease)s
 where msg_id = %(id)s and receiver = %(worker)s and status = 'inflight'
