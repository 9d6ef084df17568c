from django.db import migrations

# Events out for journeys, written as delivery's are (migration delivery 0020): a
# statement-level trigger on the history, in the transaction that writes it, nothing while
# no subscription exists. Each history row of these kinds is one event:
#   entered → journey.entered; exited → journey.exited;
#   sent, skipped, branched, resumed → journey.step_fired (what: which of them);
#   emitted → the emit step's own type (order.cancel_requested), with the instance's key
#   and properties (the order that asked to be cancelled) and the contact's phone.
TRIGGER_SQL = """
CREATE FUNCTION wb_events_journey() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT wb_events_wanted() THEN RETURN NULL; END IF;
    INSERT INTO delivery_eventoutbox (event_type, message_id, data)
    SELECT CASE n.kind WHEN 'entered' THEN 'journey.entered'
                       WHEN 'exited' THEN 'journey.exited'
                       WHEN 'emitted' THEN n.event_type
                       ELSE 'journey.step_fired' END,
           n.message_id,
           jsonb_build_object(
               'journey_id', n.journey_id, 'journey', j.name, 'version', n.version,
               'instance_id', n.instance_id, 'contact_id', n.contact_id,
               'phone', c.phone, 'user_id', c.user_id, 'key', i.key, 'step', n.step,
               'what', n.kind, 'detail', n.detail, 'message_id', n.message_id,
               'exit_kind', CASE WHEN n.kind = 'exited' THEN n.event_type END,
               'properties', CASE WHEN n.kind = 'emitted' THEN i.properties END,
               'at', n.at)
    FROM new_rows n
    JOIN journeys_journey j ON j.id = n.journey_id
    JOIN journeys_journeyinstance i ON i.id = n.instance_id
    LEFT JOIN campaigns_contact c ON c.id = n.contact_id
    WHERE n.kind IN ('entered', 'exited', 'emitted', 'sent', 'skipped', 'branched', 'resumed')
    ORDER BY n.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER journey_history_events AFTER INSERT ON journeys_journeyhistory
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wb_events_journey();
"""

DROP_SQL = """
DROP TRIGGER IF EXISTS journey_history_events ON journeys_journeyhistory;
DROP FUNCTION IF EXISTS wb_events_journey();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("journeys", "0001_journeys"),
        ("delivery", "0020_events_outbox"),
    ]

    operations = [migrations.RunSQL(TRIGGER_SQL, DROP_SQL)]
