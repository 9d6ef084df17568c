"""``wb_text_date(text)``: an uploaded attribute's value as a date, or NULL when it is not
one. A segment's date comparison over attributes (``delivery.segments.sql``) must skip a
value like "2026-02-31" or "soon" rather than fail the whole statement, which a plain
``::date`` cast would do."""

from django.db import migrations

CREATE = r"""
CREATE OR REPLACE FUNCTION wb_text_date(value text) RETURNS date
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF value IS NULL OR value !~ '^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}' THEN
        RETURN NULL;
    END IF;
    RETURN left(btrim(value), 10)::date;
EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow THEN
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("delivery", "0014_message_held_for_quality")]

    operations = [
        migrations.RunSQL(CREATE, reverse_sql="DROP FUNCTION IF EXISTS wb_text_date(text)")
    ]
