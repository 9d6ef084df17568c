"""contacts_import: files into contacts and list membership, merged and reported."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from campaigns.audience.importing import ContactImportResult, contacts_import
from campaigns.audience.rows import ImportFileError
from campaigns.models import Contact, ContactList, ListMembership
from tests.factories import make_contact, make_contact_list

pytestmark = pytest.mark.django_db


def csv_file(tmp_path: Path, text: str, name: str = "contacts.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    return path


def members(list_name: str) -> set[str]:
    return set(
        ListMembership.objects.filter(contact_list__name=list_name).values_list(
            "contact__phone", flat=True
        )
    )


def test_import_creates_contacts_and_the_list(tmp_path: Path) -> None:
    path = csv_file(
        tmp_path,
        "nome;telefone;cidade\nAna;(11) 99999-0001;SP\nBia;+55 21 99999-0002;\nX;123;\n",
    )
    result = contacts_import(path=path, list_name="vip", region="BR")
    summary = result.as_dict()
    assert {k: summary[k] for k in ("rows_total", "imported", "merged", "rejected")} == {
        "rows_total": 3,
        "imported": 2,
        "merged": 0,
        "rejected": 1,
    }
    assert summary["rejections"] == [{"line": 4, "value": "123", "reason": "not a possible number"}]
    assert summary["list_id"] == ContactList.objects.get(name="vip").pk
    assert summary["added_to_list"] == 2 and summary["rows_per_second"] > 0
    ana = Contact.objects.get(phone="+5511999990001")
    assert (ana.name, ana.attributes) == ("Ana", {"cidade": "SP"})
    assert Contact.objects.get(phone="+5521999990002").attributes == {}
    assert members("vip") == {"+5511999990001", "+5521999990002"}


def test_duplicates_in_the_file_are_merged(tmp_path: Path) -> None:
    path = csv_file(
        tmp_path,
        "phone,name,city,plan\n"
        "+5511999990001,Ana,SP,gold\n"
        "(11) 99999-0001,,,silver\n"
        "5511999990001,Ana Maria,,\n",
    )
    result = contacts_import(path=path, list_name="l", region="BR")
    assert (result.imported, result.merged, result.rejected) == (1, 2, 0)
    contact = Contact.objects.get()
    assert contact.name == "Ana Maria"
    assert contact.attributes == {"city": "SP", "plan": "silver"}


def test_duplicates_across_batches_count_as_merged(tmp_path: Path) -> None:
    path = csv_file(
        tmp_path,
        "phone,name\n+5511999990001,Ana\n+5511999990002,Bia\n+5511999990001,\n+5511999990003,C\n",
    )
    result = contacts_import(path=path, list_name="l", batch_size=2)
    assert (result.rows_total, result.imported, result.merged) == (4, 3, 1)
    assert Contact.objects.get(phone="+5511999990001").name == "Ana"
    assert ListMembership.objects.count() == 3


def test_existing_contacts_are_merged_and_added_to_the_list(tmp_path: Path) -> None:
    other = make_contact_list(name="other")
    make_contact(
        phone="+5511999990001",
        name="Old",
        attributes={"city": "SP", "tier": "1"},
        contact_list=other,
    )
    make_contact(phone="+5511999990002", name="Keep", attributes={"x": "1"})
    path = csv_file(
        tmp_path, "phone,name,tier\n+5511999990001,New,2\n+5511999990002,,\n+5511999990003,C,\n"
    )
    result = contacts_import(path=path, list_name="promo")
    assert (result.imported, result.merged, result.added_to_list) == (1, 2, 3)
    first = Contact.objects.get(phone="+5511999990001")
    assert (first.name, first.attributes) == ("New", {"city": "SP", "tier": "2"})
    second = Contact.objects.get(phone="+5511999990002")
    assert (second.name, second.attributes) == ("Keep", {"x": "1"})
    assert members("promo") == {"+5511999990001", "+5511999990002", "+5511999990003"}
    assert members("other") == {"+5511999990001"}


def test_reimport_adds_nothing_and_leaves_unchanged_contacts_alone(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "phone,name\n+5511999990001,Ana\n+5511999990002,Bia\n")
    contacts_import(path=path, list_name="l")
    before = dict(Contact.objects.values_list("phone", "updated_at"))
    again = contacts_import(path=path, list_name="l")
    assert (again.imported, again.merged, again.added_to_list) == (0, 2, 0)
    assert dict(Contact.objects.values_list("phone", "updated_at")) == before
    assert ListMembership.objects.count() == 2


def test_rejections_are_capped_in_the_summary_and_all_written_to_the_rejects_file(
    tmp_path: Path,
) -> None:
    bad = ['=HYPERLINK("http://x")', "@cmd", "-1", "abc", "12"]
    path = csv_file(tmp_path, "phone\n" + "\n".join(bad) + "\n+5511999990001\n")
    rejects = tmp_path / "rejects.csv"
    result = contacts_import(
        path=path, list_name="l", max_listed_rejections=2, rejects_path=rejects
    )
    summary = result.as_dict()
    assert summary["rejected"] == 5 and summary["rejections_truncated"] is True
    assert [r["line"] for r in summary["rejections"]] == [2, 3]
    with rejects.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    # then the upload's default country, then the file's own columns
    assert rows[0] == ["line", "value", "reason", "default_country", "phone"]
    assert [r[0] for r in rows[1:]] == ["2", "3", "4", "5", "6"]
    assert [r[1] for r in rows[1:4]] == ['\'=HYPERLINK("http://x")', "'@cmd", "'-1"]
    assert rows[5] == ["6", "12", "invalid phone number", "", "12"]  # no region: no country code


def test_the_rejects_file_keeps_every_column_and_uploads_again_once_fixed(
    tmp_path: Path,
) -> None:
    path = csv_file(
        tmp_path,
        "Name,Mobile,City,reason\nAna,+5511999990001,Recife,vip\n"
        "Bia,+55 11 9999,Natal,\nCaio,+1 call me,Olinda,old\n",
    )
    rejects = tmp_path / "rejects.csv"
    contacts_import(path=path, list_name="l", rejects_path=rejects)
    rows = list(csv.reader(rejects.open(newline="", encoding="utf-8")))
    assert rows[0] == [
        *("line", "value", "reason", "default_country"),
        *("Name", "Mobile", "City", "reason (file)"),
    ]
    assert rows[1][4:] == ["Bia", "'+55 11 9999", "Natal", ""]
    assert rows[2][4:] == ["Caio", "'+1 call me", "Olinda", "old"]
    # Fixed in a spreadsheet (the numbers), the same file goes back in.
    fixed = tmp_path / "fixed.csv"
    with fixed.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(rows[0][4:])
        out.writerow([rows[1][4], "'+55 11 99999-0002", rows[1][6], rows[1][7]])
        out.writerow([rows[2][4], "+55 11 99999-0003", rows[2][6], rows[2][7]])
    again = contacts_import(path=fixed, list_name="l", phone_column="Mobile")
    assert (again.imported, again.rejected) == (2, 0)
    assert Contact.objects.get(phone="+5511999990002").attributes["City"] == "Natal"


def test_import_is_all_or_nothing(tmp_path: Path) -> None:
    # The third row's field exceeds the csv module's limit: the file is malformed there,
    # after the first batches were already written.
    huge = "x" * (csv.field_size_limit() + 10)
    path = csv_file(
        tmp_path, f"phone,note\n+5511999990001,a\n+5511999990002,b\n+5511999990003,{huge}\n"
    )
    with pytest.raises(ImportFileError, match="line 4: malformed CSV"):
        contacts_import(path=path, list_name="l", batch_size=1)
    assert not Contact.objects.exists()
    assert not ContactList.objects.exists()


def test_one_column_file_of_numbers(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "+5511999990001\n+5511999990002\n+5511999990001\n")
    result = contacts_import(path=path, list_name="bare")
    assert (result.rows_total, result.imported, result.merged) == (3, 2, 1)
    assert result.file["header"] is False


def test_header_only_file_imports_nothing(tmp_path: Path) -> None:
    result = contacts_import(path=csv_file(tmp_path, "phone,name\n"), list_name="l")
    assert (result.rows_total, result.imported, result.rejected) == (0, 0, 0)
    assert ContactList.objects.filter(name="l").exists()


def test_empty_file_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(ImportFileError, match="empty"):
        contacts_import(path=csv_file(tmp_path, ""), list_name="l")
    assert not ContactList.objects.exists()


def test_bad_arguments(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "phone\n+5511999990001\n")
    with pytest.raises(ValidationError, match="unknown region 'XX'"):
        contacts_import(path=path, list_name="l", region="XX")
    with pytest.raises(ValidationError, match="list name must not be blank"):
        contacts_import(path=path, list_name=" ")
    with pytest.raises(ImportFileError, match="cannot read"):
        contacts_import(path=tmp_path / "missing.csv", list_name="l")


def test_long_names_are_cut_to_the_column_size(tmp_path: Path) -> None:
    path = csv_file(tmp_path, f"phone,name\n+5511999990001,{'n' * 300}\n")
    contacts_import(path=path, list_name="l")
    assert len(Contact.objects.get().name) == 200


def test_special_characters_survive_copy(tmp_path: Path) -> None:
    path = csv_file(
        tmp_path, 'phone,name,note\n+5511999990001,"Tab\there \\ back","line\nbreak ""q"""\n'
    )
    contacts_import(path=path, list_name="l")
    contact = Contact.objects.get()
    assert contact.name == "Tab\there \\ back"
    assert contact.attributes == {"note": 'line\nbreak "q"'}


@pytest.mark.django_db(transaction=True)
def test_concurrent_imports_of_overlapping_files_both_succeed(tmp_path: Path) -> None:
    phones = [f"+55119999{i:05d}" for i in range(300)]
    forward = csv_file(tmp_path, "phone\n" + "\n".join(phones) + "\n", "forward.csv")
    backward = csv_file(tmp_path, "phone\n" + "\n".join(reversed(phones)) + "\n", "back.csv")
    results: dict[str, ContactImportResult] = {}
    errors: list[BaseException] = []

    def run(path: Path, list_name: str) -> None:
        try:
            results[list_name] = contacts_import(path=path, list_name=list_name, batch_size=10)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=run, args=(forward, "a")),
        threading.Thread(target=run, args=(backward, "b")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results["a"].imported + results["b"].imported == 300
    assert results["a"].merged + results["b"].merged == 300
    assert members("a") == members("b") == set(phones)


def test_rows_repeating_a_number_are_listed_with_the_row_they_were_merged_into(
    tmp_path: Path,
) -> None:
    path = csv_file(
        tmp_path,
        "phone,name,city\n+5511999990001,Ana,Recife\n+5511999990002,Bia,\n"
        "+55 11 99999-0001,,Olinda\n+5511999990002,Beatriz,Natal\n",
    )
    result = contacts_import(path=path, list_name="l")
    summary = result.as_dict()
    assert (summary["imported"], summary["merged"], summary["repeated"]) == (2, 2, 2)
    assert summary["repeats"] == [
        {"line": 4, "phone": "+5511999990001", "merged_into_line": 2},
        {"line": 5, "phone": "+5511999990002", "merged_into_line": 3},
    ]
    ana = Contact.objects.get(phone="+5511999990001")
    assert (ana.name, ana.attributes) == ("Ana", {"city": "Olinda"})


# Two numbers repeated, each pair split across batches of two rows (and 0001 three times).
SPLIT_REPEATS = (
    "phone,name,city,plan\n"
    "+5511999990001,Ana,Recife,gold\n"  # line 2
    "+5511999990002,Bia,,\n"  # line 3
    "+5511999990003,Caio,Natal,\n"  # line 4
    "+55 11 99999-0001,,Olinda,\n"  # line 5: 0001 again
    "+5511999990002,Beatriz,,silver\n"  # line 6: 0002 again
    "5511999990001,Ana Maria,,\n"  # line 7: 0001 a third time
)
SPLIT_REPEATED_LINES = [
    {"line": 5, "phone": "+5511999990001", "merged_into_line": 2},
    {"line": 6, "phone": "+5511999990002", "merged_into_line": 3},
    {"line": 7, "phone": "+5511999990001", "merged_into_line": 2},
]


def contacts_by_phone() -> dict[str, tuple[str, dict[str, str]]]:
    return {c.phone: (c.name, c.attributes) for c in Contact.objects.all()}


def test_last_row_wins_across_the_whole_file(tmp_path: Path) -> None:
    path = csv_file(tmp_path, SPLIT_REPEATS)
    result = contacts_import(path=path, list_name="l", region="BR", batch_size=2)
    summary = result.as_dict()
    assert (result.rows_total, result.imported, result.merged, result.rejected) == (6, 3, 3, 0)
    assert summary["duplicate_policy"] == "last" and summary["repeated"] == 3
    assert summary["repeats"] == SPLIT_REPEATED_LINES
    assert contacts_by_phone() == {
        "+5511999990001": ("Ana Maria", {"city": "Olinda", "plan": "gold"}),
        "+5511999990002": ("Beatriz", {"plan": "silver"}),
        "+5511999990003": ("Caio", {"city": "Natal"}),
    }
    assert result.added_to_list == 3 and ListMembership.objects.count() == 3


def test_first_row_wins_across_the_whole_file(tmp_path: Path) -> None:
    path = csv_file(tmp_path, SPLIT_REPEATS)
    result = contacts_import(
        path=path, list_name="l", region="BR", batch_size=2, duplicate_policy="first"
    )
    assert (result.imported, result.merged, result.rejected, result.repeated) == (3, 3, 0, 3)
    assert result.repeats == SPLIT_REPEATED_LINES
    assert contacts_by_phone() == {
        "+5511999990001": ("Ana", {"city": "Recife", "plan": "gold"}),
        "+5511999990002": ("Bia", {}),
        "+5511999990003": ("Caio", {"city": "Natal"}),
    }


def test_reject_policy_rejects_every_row_of_a_repeated_number_into_the_rejects_file(
    tmp_path: Path,
) -> None:
    existing = make_contact(phone="+5511999990002", name="Old", attributes={"plan": "bronze"})
    path = csv_file(tmp_path, SPLIT_REPEATS)
    rejects = tmp_path / "rejects.csv"
    result = contacts_import(
        path=path,
        list_name="l",
        region="BR",
        batch_size=2,
        duplicate_policy="reject",
        rejects_path=rejects,
    )
    summary = result.as_dict()
    assert (result.imported, result.merged, result.rejected) == (1, 0, 5)
    assert (summary["repeated"], summary["repeats"], summary["duplicates_rejected"]) == (0, [], 5)
    assert [r["line"] for r in summary["rejections"]] == [2, 3, 5, 6, 7]
    assert summary["rejections"][0] == {
        "line": 2,
        "value": "+5511999990001",
        "reason": "the number is also on lines 5, 7: repeated numbers are rejected",
    }
    assert summary["rejections"][1]["reason"] == (
        "the number is also on line 6: repeated numbers are rejected"
    )
    # Nothing of the repeated numbers was written: the existing contact is as it was.
    assert contacts_by_phone() == {
        "+5511999990002": ("Old", {"plan": "bronze"}),
        "+5511999990003": ("Caio", {"city": "Natal"}),
    }
    assert members("l") == {"+5511999990003"} and existing.lists.count() == 0
    # The rejects file has each row's own cells under the file's header: fix, upload again.
    rows = list(csv.reader(rejects.open(encoding="utf-8")))
    own = ["line", "value", "reason", "default_country"]
    assert rows[0] == [*own, "phone", "name", "city", "plan"]
    assert [row[0] for row in rows[1:]] == ["2", "3", "5", "6", "7"]
    assert rows[3][4:] == ["'+55 11 99999-0001", "", "Olinda", ""]  # spreadsheet-safe
    fixed = csv_file(
        tmp_path,
        "phone,name,city,plan\n" + "\n".join(",".join(r[4:]) for r in rows[1:] if r[0] != "5"),
        name="fixed.csv",
    )
    again = contacts_import(path=fixed, list_name="l", region="BR", duplicate_policy="reject")
    assert again.rejected == 4  # 0001 twice, 0002 twice: still repeated, still refused


def test_reject_policy_leaves_rows_after_rejections_from_the_reader_in_order(
    tmp_path: Path,
) -> None:
    path = csv_file(tmp_path, "phone\n+5511999990001\nabc\n+5511999990001\n+5511999990004\n")
    result = contacts_import(path=path, list_name="l", duplicate_policy="reject", batch_size=1)
    assert [(r.line, r.reason) for r in result.rejections] == [
        (3, "invalid phone number"),
        (2, "the number is also on line 4: repeated numbers are rejected"),
        (4, "the number is also on line 2: repeated numbers are rejected"),
    ]
    assert (result.imported, result.rejected) == (1, 3)


def test_an_unknown_duplicate_policy_is_refused(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "phone\n+5511999990001\n")
    with pytest.raises(ValidationError, match="unknown duplicate policy 'newest'"):
        contacts_import(path=path, list_name="l", duplicate_policy="newest")
