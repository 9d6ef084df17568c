"""Scraping ``/metrics`` in tests: samples by name and labels."""

from __future__ import annotations

from dataclasses import dataclass

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    text: str
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels; KeyError when absent."""
        return self.samples[(name, frozenset(labels.items()))]

    def matching(self, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
        """Every sample of ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return {
            key_labels: value
            for (key_name, key_labels), value in self.samples.items()
            if key_name == name and wanted <= key_labels
        }

    def total(self, name: str, **labels: str) -> float:
        return sum(self.matching(name, **labels).values())

    @property
    def names(self) -> set[str]:
        return {name for name, _ in self.samples}


def scrape(client: Client | None = None) -> Scrape:
    response = (client or Client()).get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return Scrape(text, samples)
