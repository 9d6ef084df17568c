from django.db import migrations

# Stored callbacks churn: each is inserted, updated once by the applier (not a HOT update:
# its status is in an index) and deleted after the retention, so the table is a steady
# stream of dead rows at a roughly constant size. Autovacuum's defaults wait for dead rows
# of a fifth of the table: at 350,000 live rows that is 70,000 dead, and the soak hour saw
# them reach 120,000 while a pass over the table ran; the heap extended past its steady
# size (418 -> 460 MB) and the body hash index, whose random keys leave every page holding
# a few dead entries, grew with it (70 -> 83 MB). Vacuumed at a twentieth instead, the
# next hour held 5-10 % of the table dead (15-25 % before) and its heap flat; the index
# still grew, more slowly (+11 % against +15 %).
AUTOVACUUM_SQL = """
ALTER TABLE webhooks_webhookevent SET (
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05
)
"""

RESET_SQL = """
ALTER TABLE webhooks_webhookevent RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0005_unmatchedstatus_plural_name"),
    ]

    operations = [migrations.RunSQL(AUTOVACUUM_SQL, RESET_SQL)]
