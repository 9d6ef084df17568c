"""A weekly recurring campaign over a segment, three simulated weeks.

Two recurring campaigns run every week at the same hour: "weekly offer" over the segment
gold (everyone who fits that week), and "newcomers" over the list newsletter, only for
people no earlier run reached. A journey sends its own marketing template to people who
browse. The site's frequency cap is one marketing template per person in six days: each
run is a campaign of its own, launched and sent through the engine to the simulator, and
the cap holds across the runs and the journey in both directions.

Weeks pass by moving every stored time back (``travel``): the engine's own clock, which
the cap reads, then sees that time gone. The runs are asked for only at the week's turn
(a schedule by weekday reads the real calendar, which moving the data does not turn).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings
from django.utils import timezone

from campaigns.drafts import campaign_create
from campaigns.models import CampaignKind, Contact, ContactList, ListMembership, Segment
from delivery.models import Message
from journeys.models import Journey, JourneyRun
from journeys.recurring import recurring_runs
from tests.engine_support import number_on, running_simulator, work_burst
from tests.journeys.support import journey_live, post, run, template_on, travel
from webhooks.applier import events_drain

pytestmark = pytest.mark.django_db(transaction=True)

ZONE = "America/Sao_Paulo"
SENT = ("sent", "delivered", "read")
CAPPED = "frequency cap: 1 marketing message per 6 days"


def weekly(campaign_id: int, *, only_new: bool) -> dict[str, Any]:
    """Every week on today's weekday, a minute ago in São Paulo: a run is due now."""
    now = timezone.now().astimezone(ZoneInfo(ZONE)) - timedelta(minutes=1)
    return {
        "entry": {
            "type": "schedule",
            "campaign": campaign_id,
            "every": "week",
            "weekdays": [["mon", "tue", "wed", "thu", "fri", "sat", "sun"][now.weekday()]],
            "at": f"{now:%H:%M}",
            "zone": ZONE,
            "only_new": only_new,
        }
    }


def reached(journey: Journey, run: int) -> dict[str, str]:
    """Each person's row in the journey's ``run``-th run (from 1): sent, or the skip reason."""
    runs = list(JourneyRun.objects.filter(journey=journey).order_by("scheduled_for"))
    rows = Message.objects.filter(campaign_id=runs[run - 1].campaign_id)
    return {m.to: ("sent" if m.status in SENT else m.skip_reason) for m in rows}


def deliver(sim: Any) -> None:
    """The journeys' steps and the launches' jobs run, sends made, callbacks applied."""
    for _ in range(3):
        run()
        work_burst()
        assert sim.wait_webhooks_idle(timeout=30)
        events_drain(budget_seconds=30)


def gold(phone: str, tier: str = "gold") -> None:
    Contact.objects.filter(phone=phone).update(attributes={"tier": tier})


@override_settings(MARKETING_FREQUENCY_CAP="1/6d")
def test_three_weeks_of_runs_reach_who_fits_then_only_new_people_and_the_cap_holds() -> None:
    with running_simulator(latency_ms=20, read_fraction=0.0) as sim:
        number = number_on(sim, rate=80, reserve=0.0)
        template_on(number, "offer", sim=sim)
        template_on(number, "browse_offer", sim=sim)
        people = {f"G{i}": f"+5511987651{i:03d}" for i in range(1, 6)}
        people |= {f"N{i}": f"+5511987652{i:03d}" for i in range(1, 5)}
        Contact.objects.bulk_create(Contact(phone=p, name=n) for n, p in people.items())
        for name in ("G1", "G2", "G4"):
            gold(people[name])
        newsletter = ContactList.objects.create(name="newsletter")

        def subscribe(*names: str) -> None:
            for name in names:
                contact = Contact.objects.get(phone=people[name])
                ListMembership.objects.create(contact_list=newsletter, contact=contact)

        subscribe("N1", "N2")
        Segment.objects.create(name="gold", rules={"field": "tier", "op": "eq", "value": "gold"})
        mapping = {"body": {"1": {"field": "name"}}}
        offer = campaign_create(
            name="weekly offer model",
            phone_number_id=number.phone_number_id,
            template_name="offer",
            list_names=[],
            segment_names=["gold"],
            param_mapping=mapping,
        )
        welcome = campaign_create(
            name="newcomers model",
            phone_number_id=number.phone_number_id,
            template_name="offer",
            list_names=["newsletter"],
            param_mapping=mapping,
        )
        journeys = [
            journey_live(number, weekly(offer.pk, only_new=False), name="weekly offer"),
            journey_live(number, weekly(welcome.pk, only_new=True), name="newcomers"),
        ]
        Journey.objects.filter(pk__in=[j.pk for j in journeys]).update(
            live_since=timezone.now() - timedelta(hours=1)
        )
        browse = journey_live(
            number,
            {
                "entry": {"type": "event", "event": "browsed"},
                "steps": [
                    {"id": "offer", "type": "send", "template": "browse_offer", "mapping": mapping}
                ],
            },  # fmt: skip
            name="browse offer",
        )

        def week() -> None:
            report = recurring_runs()
            assert report.launched == 2, report
            deliver(sim)

        # Week 1: gold is G1, G2, G4; the newsletter N1, N2.
        week()
        offers, newcomers = journeys
        assert reached(offers, 1) == dict.fromkeys(
            (people["G1"], people["G2"], people["G4"]), "sent"
        )
        assert reached(newcomers, 1) == dict.fromkeys((people["N1"], people["N2"]), "sent")

        # Five days on: G3 joins gold and browses (the journey sends: nothing before); G2
        # browses too (run 1 reached them five days ago: the cap skips the journey's send).
        travel(timedelta(days=5))
        gold(people["G3"])
        post([{"phone": people[n], "name": "browsed"} for n in ("G3", "G2")])
        deliver(sim)
        browse_rows = {
            m.to: "sent" if m.status in SENT else m.skip_reason
            for m in Message.objects.filter(campaign__journey_step__journey=browse)
        }
        assert browse_rows == {people["G3"]: "sent", people["G2"]: CAPPED}

        # Week 2, two days later: G4 left gold, G5 joined; N3 subscribed.
        travel(timedelta(days=2))
        gold(people["G4"], tier="silver")
        gold(people["G5"])
        subscribe("N3")
        week()
        assert reached(offers, 2) == {
            people["G1"]: "sent",
            people["G2"]: "sent",  # the journey's send to them was skipped: nothing counts
            people["G3"]: CAPPED,  # the journey sent them two days ago
            people["G5"]: "sent",
        }
        assert reached(newcomers, 2) == {
            people["N1"]: "left out: reached by an earlier run",
            people["N2"]: "left out: reached by an earlier run",
            people["N3"]: "sent",
        }

        # Week 3: N4 subscribed; everyone's last marketing is a week old.
        travel(timedelta(days=7))
        subscribe("N4")
        week()
        assert reached(offers, 3) == dict.fromkeys(
            (people["G1"], people["G2"], people["G3"], people["G5"]), "sent"
        )
        third = reached(newcomers, 3)
        assert third[people["N4"]] == "sent"
        assert {v for k, v in third.items() if k != people["N4"]} == {
            "left out: reached by an earlier run"
        }
        # Each run is a campaign of its own, with its report; a run happens once.
        assert JourneyRun.objects.count() == 6
        assert all(r.campaign.kind == CampaignKind.RECURRING_RUN for r in JourneyRun.objects.all())
        assert recurring_runs().launched == 0
        # Nobody had two marketing templates within six days, whatever sent them.
        sent_at: dict[str, list[Any]] = {}
        for m in Message.objects.filter(status__in=SENT).order_by("sent_at"):
            sent_at.setdefault(m.to, []).append(m.sent_at)
        for phone, times in sent_at.items():
            gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
            assert all(gap >= timedelta(days=6) for gap in gaps), (phone, gaps)
