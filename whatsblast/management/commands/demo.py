"""``manage.py demo``: the whole system on one machine, sending a campaign to the simulator.

Starts (with the embedded PostgreSQL and Redis when no URLs are set) the Cloud API
simulator, the web server on 127.0.0.1:8000 (admin and Meta's webhook), two RQ workers
and the ticker; creates a demo admin user, a number, a template and a list of contacts;
launches the campaign and draws its progress until it completes. The admin stays up until
Ctrl-C.
"""

from __future__ import annotations

import csv
import json
import secrets
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from campaigns.audience.importing import contacts_import
from campaigns.drafts import campaign_create
from campaigns.models import BusinessAccount, Campaign, PhoneNumber, RateCard, Template
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.progress import (
    campaign_progress,
    outcome_counts,
    rate_measured,
    recent_rate,
)
from delivery.campaigns.rate_cards import SAMPLE_RATE_CARD, rate_card_load
from journeys.events_in import events_record
from journeys.models import Journey
from journeys.versions import journey_create, journey_go_live
from whatsblast.auth.roles import MARKETING, OPERATORS, SUPPORT, role_grant, roles_sync
from whatsblast.core.env import env_file_write_development
from whatsblast.core.processes import (
    ChildExited,
    ProcessGroup,
    port_is_free,
    service_environment,
    wait_for_http,
)

DEMO_NUMBER_ID = "100000000000001"
DEMO_TOKEN = "demo-access-token"  # noqa: S105 - the simulator's token, not a real one
DEMO_TEMPLATE = "spring_sale"
DEMO_CART_TEMPLATE = "cart_reminder"
DEMO_LIST = "demo customers"
# The demo's journey: carts left by some of the demo's customers, reminded two minutes on
# (a shop waits an hour), a checkout stopping some of them first.
DEMO_JOURNEY = "Cart reminder"
DEMO_CARTS = 300
DEMO_CHECKOUTS = 60
DEMO_CART_WAIT_MINUTES = 2
# A few recipients Meta "refuses" so the support pages have something to show: the first
# kind fails at once (not a WhatsApp user), the second keeps erroring until its retries run
# out and becomes a dead letter.
DEMO_UNDELIVERABLE = (7, 301, 1502, 4003)  # 131026 Message undeliverable
DEMO_DEAD = (11, 911, 2024)  # 131000 Something went wrong: retried, then dead-lettered
DEMO_ROLE_USERS = (("marketer", MARKETING), ("support", SUPPORT), ("operator", OPERATORS))


def child_exit_error(exc: ChildExited, group: ProcessGroup) -> CommandError:
    """A demo process that ended, as the command's error: which one, its exit code and its
    log's last lines are the whole story, so no traceback is printed under them."""
    return CommandError(
        f"{exc}\n(the demo stops when one of its processes ends; logs: {group.log_dir})"
    )


class Command(BaseCommand):
    help = "Run the whole system locally and send a demo campaign to the Cloud API simulator."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--contacts", type=int, default=20_000)
        parser.add_argument("--rate", type=int, default=250, help="number's msg/s")
        parser.add_argument("--reserve", type=float, default=0.2)
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--sim-port", type=int, default=9009)
        parser.add_argument("--latency-ms", type=float, default=250)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument(
            "--exit-when-done", action="store_true", help="stop everything when the campaign ends"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        for port in (options["port"], options["sim_port"]):
            if not port_is_free(port):
                raise CommandError(f"port {port} is in use; stop what runs there or pass --port")
        call_command("migrate", verbosity=0)
        password = self._admin_user()
        role_passwords = self._role_users()
        secret = settings.WHATSAPP_APP_SECRET or secrets.token_hex(16)
        verify = settings.WHATSAPP_VERIFY_TOKEN or secrets.token_hex(8)
        web = f"http://127.0.0.1:{options['port']}"
        sim = f"http://127.0.0.1:{options['sim_port']}"
        secret_key = self._local_env_file()
        env = {
            **service_environment(),
            "WHATSAPP_APP_SECRET": secret,
            "WHATSAPP_VERIFY_TOKEN": verify,
            "DEBUG": "1" if settings.DEBUG else "0",
            "SECRET_KEY": secret_key,
        }
        group = ProcessGroup(settings.DATA_DIR / "logs", env)
        stop = _install_stop_handler()
        try:
            self._start(group, options, web, sim, secret)
            campaign_id = self._prepare(options, sim)
            self.stdout.write(
                f"\nAdmin: {web}/admin/  user: demo  password: {password}\n"
                + "".join(
                    f"       as {role}: user {username}  password {role_passwords[username]}\n"
                    for username, role in DEMO_ROLE_USERS
                )
                + f"Simulator: {sim}/_sim/stats   logs: {group.log_dir}\n"
            )
            self._follow(campaign_id, group, stop, options["rate"] * (1 - options["reserve"]))
            if options["exit_when_done"]:
                return
            self.stdout.write("\nThe admin stays up. Ctrl-C stops everything.\n")
            while not stop():
                group.check()
                time.sleep(0.5)
        except ChildExited as exc:
            raise child_exit_error(exc, group) from None
        finally:
            group.stop()

    def _local_env_file(self) -> str:
        """With DEBUG on, the local settings file (./.env) the demo's processes share with
        any ``manage.py …`` typed by hand next to it: written once with DEBUG on and a
        random SECRET_KEY, then kept. Returns the SECRET_KEY every demo process uses."""
        if not settings.DEBUG or settings.ENV_FILE is None:
            return settings.SECRET_KEY
        existed = settings.ENV_FILE.exists()
        key = env_file_write_development(settings.ENV_FILE) or settings.SECRET_KEY
        if not existed:
            self.stdout.write(
                f"Wrote {settings.ENV_FILE} (DEBUG on, a SECRET_KEY): manage.py commands "
                "run by hand from this checkout use it."
            )
        return key

    def _admin_user(self) -> str:
        password = secrets.token_urlsafe(12)
        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(
            username="demo", defaults={"is_staff": True, "is_superuser": True}
        )
        user.set_password(password)
        user.save()
        return password

    def _role_users(self) -> dict[str, str]:
        """A marketer, a support agent and an operator, to see the admin as they do (not as
        superuser)."""
        roles_sync()
        user_model = get_user_model()
        passwords = {}
        for username, role in DEMO_ROLE_USERS:
            user, _ = user_model.objects.get_or_create(username=username)
            passwords[username] = secrets.token_urlsafe(9)
            user.set_password(passwords[username])
            user.save()
            role_grant(username=username, role=role)
        return passwords

    def _start(
        self, group: ProcessGroup, options: dict[str, Any], web: str, sim: str, secret: str
    ) -> None:
        group.manage(
            "simulator",
            "simulator",
            "--port", str(options["sim_port"]),
            "--latency-ms", str(options["latency_ms"]),
            "--jitter-ms", str(options["latency_ms"] / 5),
            "--no-pair-limit",
            "--number", f"{DEMO_NUMBER_ID}:{DEMO_TOKEN}:{options['rate']}",
            "--template", f"{DEMO_TEMPLATE}:en_US:1",
            "--template", f"{DEMO_CART_TEMPLATE}:en_US:1",
            "--callback-url", f"{web}/webhooks/whatsapp",
            f"--app-secret={secret}",
            "--webhook-batch-size", "50",
            "--config", str(self._sim_config(group.log_dir, options["contacts"])),
        )  # fmt: skip
        group.start(
            "web",
            [
                "-m", "gunicorn", "whatsblast.asgi", "--worker-class", "asgi",
                # As deploy/gunicorn.conf.py runs it: the parser that keeps a large request
                # sent straight after an answer on a kept-alive connection.
                "--http-parser", "python",
                "--bind", web.removeprefix("http://"),
                "--workers", "2",
                "--access-logfile", "-",
            ],
        )  # fmt: skip
        for index in range(options["workers"]):
            group.manage(
                f"worker-{index + 1}",
                "rqworker", "transactional", "campaigns", "maintenance",
                *(["--with-scheduler"] if index == 0 else []),
            )  # fmt: skip
        group.manage("ticker", "ticker", "--every", "1")
        # Idle until an event subscription exists (admin: Event subscriptions).
        group.manage("events", "events")
        wait_for_http(f"{sim}/_sim/stats")
        wait_for_http(f"{web}/healthz")
        group.check()

    @staticmethod
    def _sim_config(directory: Path, contacts: int) -> Path:
        fails = {_demo_phone(i): 131026 for i in DEMO_UNDELIVERABLE if i < contacts}
        fails |= {_demo_phone(i): 131000 for i in DEMO_DEAD if i < contacts}
        path = directory / "simulator-demo.json"
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"config": {"fail_recipients": fails}}))
        return path

    def _prepare(self, options: dict[str, Any], sim: str) -> int:
        account, _ = BusinessAccount.objects.update_or_create(
            waba_id="demo-waba",
            defaults={"name": "Demo business", "messaging_limit_tier": "TIER_UNLIMITED"},
        )
        PhoneNumber.objects.update_or_create(
            phone_number_id=DEMO_NUMBER_ID,
            defaults={
                "display_phone_number": "+15550100001",
                "account": account,
                "access_token": DEMO_TOKEN,
                "rate_per_second": options["rate"],
                "transactional_reserve": options["reserve"],
                "api_base_url": sim,
            },
        )
        Template.objects.update_or_create(
            account=account,
            name=DEMO_TEMPLATE,
            language="en_US",
            defaults={"body_text": "Hi {{1}}, spring sale starts today!", "body_param_count": 1},
        )
        Template.objects.update_or_create(
            account=account,
            name=DEMO_CART_TEMPLATE,
            language="en_US",
            defaults={"body_text": "Hi {{1}}, your cart is waiting for you", "body_param_count": 1},
        )
        if not RateCard.objects.exists():  # an operator's own card is never replaced
            loaded = rate_card_load(SAMPLE_RATE_CARD)
            self.stdout.write(f"Rate card: a sample of Meta's. {loaded.text()}")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "contacts.csv"
            _write_contacts(path, options["contacts"])
            result = contacts_import(path=path, list_name=DEMO_LIST, region="BR")
        self.stdout.write(
            f"Imported {result.rows_total:,} contacts into '{DEMO_LIST}' "
            f"({result.rows_per_second:,.0f} rows/s, {result.rejected} rejected)"
        )
        campaign = campaign_create(
            name=f"Spring sale {time.strftime('%H:%M:%S')}",
            phone_number_id=DEMO_NUMBER_ID,
            template_name=DEMO_TEMPLATE,
            list_names=[DEMO_LIST],
            param_mapping={"body": {"1": {"field": "name", "fallback": "there"}}},
        )
        self._journey(options["contacts"])
        # Few tries, so the demo's dead letters appear within its first minute.
        Campaign.objects.filter(pk=campaign.pk).update(max_attempts=2)
        campaign.refresh_from_db()
        summary = campaign_start(campaign=campaign)
        share = options["rate"] * (1 - options["reserve"])
        self.stdout.write(
            f"Campaign {campaign.pk} launched: {summary.pending:,} recipients. The number "
            f"allows {options['rate']:,} msg/s and keeps {options['reserve']:.0%} for "
            f"transactional sends, so the campaign is paced to at most {share:,.0f} msg/s; "
            "the rate measured stays a little below it (the pacing never goes over)."
        )
        return campaign.pk

    def _journey(self, contacts: int) -> None:
        """A live cart-reminder journey and carts for it, through the events service as the
        API stores them: the Journeys page fills as the reminders fall due."""
        number = PhoneNumber.objects.get(phone_number_id=DEMO_NUMBER_ID)
        journey = Journey.objects.filter(name=DEMO_JOURNEY).first()
        if journey is None:
            journey = journey_create(
                name=DEMO_JOURNEY,
                phone_number=number,
                description="Reminds a cart left behind; a checkout stops it.",
                definition={
                    "entry": {"type": "event", "event": "cart_updated"},
                    "key": "cart_id",
                    "exits": [{"event": "checkout", "reason": "bought"}],
                    "goal": {"event": "checkout", "within_days": 3},
                    "steps": [
                        {
                            "id": "wait",
                            "type": "wait",
                            "delay": {"minutes": DEMO_CART_WAIT_MINUTES},
                        },
                        {
                            "id": "remind",
                            "type": "send",
                            "template": DEMO_CART_TEMPLATE,
                            "mapping": {"body": {"1": {"field": "name", "fallback": "there"}}},
                        },
                    ],
                },  # fmt: skip
            )
        journey_go_live(journey=journey)
        carts = min(DEMO_CARTS, contacts)
        stamp = time.strftime("%H%M%S")
        events = [
            {"phone": _demo_phone(i), "name": "cart_updated", "id": f"demo-cart-{stamp}-{i}",
             "properties": {"cart_id": f"{stamp}-{i}"}}
            for i in range(carts)
        ] + [
            {"phone": _demo_phone(i), "name": "checkout", "id": f"demo-checkout-{stamp}-{i}",
             "properties": {"cart_id": f"{stamp}-{i}"}}
            for i in range(0, carts, max(1, carts // DEMO_CHECKOUTS))
        ]  # fmt: skip
        stored = events_record(api_key_id=None, items=events, idempotency_key=None)
        self.stdout.write(
            f"Journey '{DEMO_JOURNEY}': {stored.stored:,} cart events in; carts not bought "
            f"within {DEMO_CART_WAIT_MINUTES} minutes get a reminder (admin: Journeys)."
        )

    def _follow(self, campaign_id: int, group: ProcessGroup, stop: Any, share_rate: float) -> None:
        while not stop():
            group.check()
            campaign = Campaign.objects.get(pk=campaign_id)
            progress = campaign_progress(campaign=campaign)
            line = _progress_line(progress, campaign.started_at, share_rate)
            sys.stdout.write("\r" + line)
            sys.stdout.flush()
            if progress.status in ("completed", "cancelled"):
                sys.stdout.write("\n")
                return
            time.sleep(0.5)


def _progress_line(progress: Any, started_at: Any = None, configured_rate: float = 0.0) -> str:
    """The terminal bar, in the words of the admin's pages. The rate is over the last
    minute or since the start (or a resume) when shorter, as on the campaign page, so the
    first seconds show the real pace instead of a minute's average climbing from zero.
    Until that pace is measured (its first seconds) the ETA is at ``configured_rate``,
    the campaign's share of the number, marked with "~"."""
    figures = outcome_counts(counts=progress.counts)
    done = progress.total - progress.remaining
    width = 30
    filled = int(width * done / progress.total) if progress.total else width
    since = progress.rate_since or started_at
    now = progress.measured_at
    rate, _ = recent_rate(started_at=since, sent_last_minute=progress.sent_last_minute, now=now)
    if not progress.remaining:
        eta = "done"
    elif rate and rate_measured(since=since, now=now):
        eta = f"{progress.remaining / rate:.0f}s"
    elif configured_rate:
        eta = f"~{progress.remaining / configured_rate:.0f}s"
    else:
        eta = "?"
    return (
        f"[{'#' * filled}{'.' * (width - filled)}] {done}/{progress.total}  "
        f"sent {figures['sent']} delivered {figures['delivered']} "
        f"read {figures['read']} failed {figures['failed']}  "
        f"{rate:.0f} msg/s  ETA {eta}  ({progress.status})   "
    )


def _demo_phone(index: int) -> str:
    return f"+55119{index:08d}"


def _write_contacts(path: Path, count: int) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["phone", "name"])
        for i in range(count):
            writer.writerow([f"+55 11 9{i:08d}", f"Customer {i}"])


def _install_stop_handler() -> Any:
    stopped = False

    def handler(*_: object) -> None:
        nonlocal stopped
        stopped = True

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return lambda: stopped
