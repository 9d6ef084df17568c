"""The operator commands: phonenumber, template, contacts, campaign (create, status)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from campaigns.models import Campaign, Contact, ListMembership, PhoneNumber, Template
from tests.factories import make_message

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def setup_campaign_inputs(tmp_path: Path) -> None:
    run("phonenumber", "add", "--id", "PN1", "--display", "+15550001", "--token", "tok")
    run(
        "template",
        "add",
        "--number",
        "PN1",
        "--name",
        "promo",
        "--language",
        "en_US",
        "--body",
        "Hi {{1}}, use {{2}}",
    )
    path = tmp_path / "c.csv"
    path.write_text("phone,name\n+5511999990001,Ana\n", encoding="utf-8")
    run("contacts", "import", str(path), "--list", "vip")


@pytest.mark.parametrize(
    "argv",
    [
        ("phonenumber", "add"),
        ("template", "add"),
        ("contacts", "import"),
        ("campaign", "create"),
        ("campaign", "status"),
    ],
)
def test_each_subcommand_has_help(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        call_command(*argv, "--help")
    assert exit_info.value.code == 0
    assert f"{' '.join(argv)} [-h]" in capsys.readouterr().out


def test_phonenumber_add_prints_the_id() -> None:
    assert run("phonenumber", "add", "--id", "PN1", "--display", "+15550001", "--token", "t") == (
        "PN1"
    )
    assert (
        run(
            "phonenumber",
            "add",
            "--id",
            "PN2",
            "--display",
            "+15550002",
            "--token",
            "t",
            "--waba",
            "W9",
            "--rate",
            "250",
            "--reserve",
            "0.3",
            "--api-base-url",
            "http://127.0.0.1:9009",
        )
        == "PN2"
    )
    first, second = PhoneNumber.objects.order_by("phone_number_id").select_related("account")
    assert (first.account.waba_id, first.rate_per_second) == ("default", 80)
    assert (second.account.waba_id, second.rate_per_second, second.transactional_reserve) == (
        "W9",
        250,
        0.3,
    )
    assert second.api_base_url == "http://127.0.0.1:9009"


def test_phonenumber_add_reads_the_token_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("from-stdin\n"))
    run("phonenumber", "add", "--id", "PN1", "--display", "+1", "--token", "-")
    assert PhoneNumber.objects.get().access_token == "from-stdin"


def test_phonenumber_add_errors_are_command_errors() -> None:
    with pytest.raises(CommandError, match="rate_per_second: .*less than or equal to 1000"):
        run(
            "phonenumber", "add", "--id", "PN1", "--display", "+1", "--token", "t", "--rate", "5000"
        )
    run("phonenumber", "add", "--id", "PN1", "--display", "+1", "--token", "t")
    with pytest.raises(CommandError, match="already exists"):
        run("phonenumber", "add", "--id", "PN1", "--display", "+1", "--token", "t")


def test_template_add() -> None:
    run("phonenumber", "add", "--id", "PN1", "--display", "+1", "--token", "t")
    template_id = run(
        "template",
        "add",
        "--number",
        "PN1",
        "--name",
        "promo",
        "--language",
        "pt_BR",
        "--body",
        "Oi {{nome}}",
        "--category",
        "utility",
    )
    template = Template.objects.get(pk=int(template_id))
    assert (template.body_param_names, template.category, template.status) == (
        ["nome"],
        "UTILITY",
        "APPROVED",
    )
    with pytest.raises(CommandError, match="without gaps"):
        run(
            "template",
            "add",
            "--number",
            "PN1",
            "--name",
            "x",
            "--language",
            "en_US",
            "--body",
            "{{2}}",
        )
    with pytest.raises(CommandError, match="no phone number with id 'PN9'"):
        run("template", "add", "--number", "PN9", "--name", "x", "--language", "en_US")


def test_contacts_import_prints_a_json_summary(tmp_path: Path) -> None:
    path = tmp_path / "contatos.csv"
    path.write_bytes(
        "\ufeffNome;Celular;Cidade\nAna;(11) 99999-0001;SP\nBia;11 99999-0001;\nX;=1+1;\n".encode()
    )
    rejects = tmp_path / "rejects.csv"
    summary = json.loads(
        run(
            "contacts",
            "import",
            str(path),
            "--list",
            "vip",
            "--region",
            "BR",
            "--rejects",
            str(rejects),
        )
    )
    assert {k: summary[k] for k in ("rows_total", "imported", "merged", "rejected")} == {
        "rows_total": 3,
        "imported": 1,
        "merged": 1,
        "rejected": 1,
    }
    assert summary["rejections"] == [{"line": 4, "value": "=1+1", "reason": "invalid phone number"}]
    assert summary["file"]["delimiter"] == ";" and summary["file"]["phone_column"] == "Celular"
    assert {"list_id", "seconds", "rows_per_second"} <= summary.keys()
    contact = Contact.objects.get()
    assert (contact.phone, contact.name, contact.attributes) == (
        "+5511999990001",
        "Bia",
        {"Cidade": "SP"},
    )
    assert ListMembership.objects.get().contact_list_id == summary["list_id"]
    assert "'=1+1" in rejects.read_text(encoding="utf-8")


def test_contacts_import_file_errors_are_command_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(CommandError, match="the file is empty"):
        run("contacts", "import", str(empty), "--list", "vip")
    with pytest.raises(CommandError, match="unknown region"):
        run("contacts", "import", str(empty), "--list", "vip", "--region", "ZZ")


def test_contacts_import_with_a_named_phone_column(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("id,primary\n1,+5511999990001\n", encoding="utf-8")
    with pytest.raises(CommandError, match="no phone column found"):
        run("contacts", "import", str(path), "--list", "vip")
    summary = json.loads(
        run("contacts", "import", str(path), "--list", "vip", "--phone-column", "primary")
    )
    assert summary["imported"] == 1


def test_campaign_create_maps_fields_and_constants(tmp_path: Path) -> None:
    setup_campaign_inputs(tmp_path)
    campaign_id = run(
        "campaign",
        "create",
        "--name",
        "Sale",
        "--number",
        "PN1",
        "--template",
        "promo",
        "--list",
        "vip",
        "--param",
        "1=name",
        "--param",
        "2=const:SALE20",
    )
    campaign = Campaign.objects.get(pk=int(campaign_id))
    assert campaign.param_mapping == {"body": {"1": {"field": "name"}, "2": {"value": "SALE20"}}}
    assert list(campaign.lists.values_list("name", flat=True)) == ["vip"]
    assert campaign.status == "draft"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (["--param", "1=name"], r"body param\(s\) 2 of template 'promo' are not mapped"),
        (["--param", "1=name", "--param", "2=x", "--param", "7=y"], r"no body param\(s\) 7"),
        (["--param", "1"], "expected PARAM=FIELD or PARAM=const:VALUE"),
    ],
)
def test_campaign_create_refuses_bad_mappings(
    tmp_path: Path, params: list[str], message: str
) -> None:
    setup_campaign_inputs(tmp_path)
    with pytest.raises(CommandError, match=message):
        run(
            "campaign",
            "create",
            "--name",
            "Sale",
            "--number",
            "PN1",
            "--template",
            "promo",
            "--list",
            "vip",
            *params,
        )
    assert not Campaign.objects.exists()


def test_campaign_status(tmp_path: Path) -> None:
    setup_campaign_inputs(tmp_path)
    campaign_id = run(
        "campaign",
        "create",
        "--name",
        "Sale",
        "--number",
        "PN1",
        "--template",
        "promo",
        "--list",
        "vip",
        "--param",
        "1=name",
        "--param",
        "2=const:X",
    )
    campaign = Campaign.objects.get(pk=int(campaign_id))
    make_message(campaign=campaign, status="pending")
    make_message(campaign=campaign, status="sent", sent_at=timezone.now())
    data = json.loads(run("campaign", "status", campaign_id, "--json"))
    assert data["counts"]["pending"] == 1 and data["counts"]["sent"] == 1
    assert data["remaining"] == 1 and data["sent_last_minute"] == 1
    assert data["eta_seconds"] == 60.0
    text = run("campaign", "status", campaign_id)
    assert "messages 2, remaining 1" in text and "pending 1  sent 1" in text
    with pytest.raises(CommandError, match="no campaign with id 999999"):
        run("campaign", "status", "999999")


def test_contacts_import_duplicate_policy_over_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "repeats.csv"
    # 0001 on lines 2 and 4, in different batches of two rows.
    path.write_text("phone,name\n+5511999990001,Ana\n+5511999990002,Bia\n+5511999990001,Ann\n")
    rejects = tmp_path / "rejects.csv"
    args = ("contacts", "import", str(path), "--list", "vip", "--batch-size", "2")
    first = json.loads(run(*args, "--duplicates", "first"))
    assert (first["duplicate_policy"], first["imported"], first["repeated"]) == ("first", 2, 1)
    assert first["repeats"] == [{"line": 4, "phone": "+5511999990001", "merged_into_line": 2}]
    assert Contact.objects.get(phone="+5511999990001").name == "Ana"

    strict = json.loads(
        run(*args, "--list", "strict", "--duplicates", "reject", "--rejects", str(rejects))
    )
    assert (strict["imported"], strict["rejected"], strict["duplicates_rejected"]) == (0, 2, 2)
    assert [r["line"] for r in strict["rejections"]] == [2, 4]
    assert rejects.read_text().splitlines()[1:] == [
        "2,+5511999990001,the number is also on line 4: repeated numbers are rejected,,"
        "+5511999990001,Ana",
        "4,+5511999990001,the number is also on line 2: repeated numbers are rejected,,"
        "+5511999990001,Ann",
    ]
    with pytest.raises(CommandError):
        run(*args, "--duplicates", "newest")
