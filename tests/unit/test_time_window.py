"""The time window a "when" question names (primitives.retrieval.time_window), in each
language of the labelled intent set (tests/data/intent_questions*.tsv)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from primitives.retrieval import time_window
from primitives.retrieval._window import LANGUAGES

NOW = datetime(2026, 2, 25, 15, 30, tzinfo=UTC)   # a Wednesday
DATA = Path(__file__).resolve().parents[1] / "data"

TODAY = ("2026-02-25", "2026-02-26")
YESTERDAY = ("2026-02-24", "2026-02-25")
DAY_BEFORE = ("2026-02-23", "2026-02-24")
THIS_WEEK = ("2026-02-23", "2026-03-02")
LAST_WEEK = ("2026-02-16", "2026-02-23")
THIS_MONTH = ("2026-02-01", "2026-03-01")
LAST_MONTH = ("2026-01-01", "2026-02-01")
THIS_YEAR = ("2026-01-01", "2027-01-01")
LAST_YEAR = ("2025-01-01", "2026-01-01")
THREE_DAYS_AGO = ("2026-02-22", "2026-02-23")
TWO_WEEKS_AGO = ("2026-02-09", "2026-02-16")
TWO_MONTHS_AGO = ("2025-12-01", "2026-01-01")
MARCH = ("2025-03-01", "2025-04-01")          # March 2026 is ahead: the latest one begun
JANUARY = ("2026-01-01", "2026-02-01")
DECEMBER_2024 = ("2024-12-01", "2025-01-01")
LAST_FRIDAY = ("2026-02-20", "2026-02-21")
ISO_DAY = ("2026-02-03", "2026-02-04")
SINCE_MONDAY = ("2026-02-23", None)
SINCE_JANUARY = ("2026-01-01", None)
SINCE_YESTERDAY = ("2026-02-24", None)
LAST_3_DAYS = ("2026-02-22", None)            # now minus 3 days, open to now
LAST_2_WEEKS = ("2026-02-11", None)

# (language, question, window as dates): every phrase the window reads, in every language
TABLE = [
    ("en", "what happened today?", TODAY),
    ("en", "what did we discuss yesterday", YESTERDAY),
    ("en", "what did I do the day before yesterday?", DAY_BEFORE),
    ("en", "when did we talk this week?", THIS_WEEK),
    ("en", "what happened last week", LAST_WEEK),
    ("en", "what changed this month", THIS_MONTH),
    ("en", "when did it break last month", LAST_MONTH),
    ("en", "what did we do this year", THIS_YEAR),
    ("en", "what did we do last year", LAST_YEAR),
    ("en", "what did I say 3 days ago?", THREE_DAYS_AGO),
    ("en", "who called two weeks ago", TWO_WEEKS_AGO),
    ("en", "what did we buy 2 months ago", TWO_MONTHS_AGO),
    ("en", "what did we plan in March?", MARCH),
    ("en", "when did we meet in January?", JANUARY),
    ("en", "what happened in december 2024", DECEMBER_2024),
    ("en", "what did we decide last Friday", LAST_FRIDAY),
    ("en", "what happened on 2026-02-03?", ISO_DAY),
    ("en", "what have I done since Monday?", SINCE_MONDAY),
    ("en", "What have I been doing since January?", SINCE_JANUARY),
    ("en", "what changed since yesterday", SINCE_YESTERDAY),
    ("en", "what happened in the last 3 days?", LAST_3_DAYS),
    ("en", "what did we discuss over the past two weeks", LAST_2_WEEKS),
    ("en", "what did we decide at last month's review", LAST_MONTH),
    ("fr", "Qu'est-ce qui s'est passé aujourd'hui ?", TODAY),
    ("fr", "De quoi avons-nous parlé hier ?", YESTERDAY),
    ("fr", "qu'ai-je fait avant-hier", DAY_BEFORE),
    ("fr", "quand avons-nous parlé cette semaine ?", THIS_WEEK),
    ("fr", "que s'est-il passé la semaine dernière", LAST_WEEK),
    ("fr", "qu'est-ce qui a changé ce mois-ci", THIS_MONTH),
    ("fr", "quand est-ce que ça a cassé le mois dernier", LAST_MONTH),
    ("fr", "qu'avons-nous fait cette année", THIS_YEAR),
    ("fr", "qu'avons-nous fait l'année dernière", LAST_YEAR),
    ("fr", "qu'est-ce que j'ai dit il y a 3 jours ?", THREE_DAYS_AGO),
    ("fr", "qui a appelé il y a deux semaines", TWO_WEEKS_AGO),
    ("fr", "qu'avons-nous acheté il y a 2 mois", TWO_MONTHS_AGO),
    ("fr", "qu'avions-nous prévu en mars ?", MARCH),
    ("fr", "quand nous sommes-nous vus en janvier ?", JANUARY),
    ("fr", "que s'est-il passé en décembre 2024", DECEMBER_2024),
    ("fr", "qu'avons-nous décidé vendredi dernier", LAST_FRIDAY),
    ("fr", "que s'est-il passé le 2026-02-03 ?", ISO_DAY),
    ("fr", "qu'ai-je fait depuis lundi ?", SINCE_MONDAY),
    ("fr", "qu'est-ce que j'ai fait depuis janvier ?", SINCE_JANUARY),
    ("fr", "qu'est-ce qui a changé depuis hier", SINCE_YESTERDAY),
    ("fr", "que s'est-il passé ces 3 derniers jours ?", LAST_3_DAYS),
    ("fr", "de quoi avons-nous parlé depuis deux semaines", LAST_2_WEEKS),
    ("de", "Was ist heute passiert?", TODAY),
    ("de", "Worüber haben wir gestern gesprochen?", YESTERDAY),
    ("de", "was habe ich vorgestern gemacht", DAY_BEFORE),
    ("de", "wann haben wir diese Woche gesprochen?", THIS_WEEK),
    ("de", "was ist letzte Woche passiert", LAST_WEEK),
    ("de", "was hat sich diesen Monat geändert", THIS_MONTH),
    ("de", "wann ist es letzten Monat kaputtgegangen", LAST_MONTH),
    ("de", "was haben wir dieses Jahr gemacht", THIS_YEAR),
    ("de", "was haben wir letztes Jahr gemacht", LAST_YEAR),
    ("de", "was habe ich vor 3 Tagen gesagt?", THREE_DAYS_AGO),
    ("de", "wer hat vor zwei Wochen angerufen", TWO_WEEKS_AGO),
    ("de", "was haben wir vor 2 Monaten gekauft", TWO_MONTHS_AGO),
    ("de", "was hatten wir im März geplant?", MARCH),
    ("de", "wann haben wir uns im Januar getroffen?", JANUARY),
    ("de", "was ist im Dezember 2024 passiert", DECEMBER_2024),
    ("de", "was haben wir letzten Freitag beschlossen", LAST_FRIDAY),
    ("de", "was ist am 2026-02-03 passiert?", ISO_DAY),
    ("de", "was habe ich seit Montag gemacht?", SINCE_MONDAY),
    ("de", "was habe ich seit Januar gemacht?", SINCE_JANUARY),
    ("de", "was hat sich seit gestern geändert", SINCE_YESTERDAY),
    ("de", "was ist in den letzten 3 Tagen passiert?", LAST_3_DAYS),
    ("de", "worüber sprechen wir seit zwei Wochen", LAST_2_WEEKS),
    ("es", "¿Qué pasó hoy?", TODAY),
    ("es", "¿De qué hablamos ayer?", YESTERDAY),
    ("es", "qué hice anteayer", DAY_BEFORE),
    ("es", "¿cuándo hablamos esta semana?", THIS_WEEK),
    ("es", "¿qué pasó la semana pasada?", LAST_WEEK),
    ("es", "qué cambió este mes", THIS_MONTH),
    ("es", "cuándo se rompió el mes pasado", LAST_MONTH),
    ("es", "qué hicimos este año", THIS_YEAR),
    ("es", "qué hicimos el año pasado", LAST_YEAR),
    ("es", "¿qué dije hace 3 días?", THREE_DAYS_AGO),
    ("es", "quién llamó hace dos semanas", TWO_WEEKS_AGO),
    ("es", "qué compramos hace 2 meses", TWO_MONTHS_AGO),
    ("es", "¿qué planeamos en marzo?", MARCH),
    ("es", "¿cuándo nos vimos en enero?", JANUARY),
    ("es", "qué pasó en diciembre 2024", DECEMBER_2024),
    ("es", "qué decidimos el viernes pasado", LAST_FRIDAY),
    ("es", "¿qué pasó el 2026-02-03?", ISO_DAY),
    ("es", "¿qué he hecho desde el lunes?", SINCE_MONDAY),
    ("es", "¿qué he hecho desde enero?", SINCE_JANUARY),
    ("es", "qué cambió desde ayer", SINCE_YESTERDAY),
    ("es", "¿qué pasó en los últimos 3 días?", LAST_3_DAYS),
    ("es", "de qué hablamos desde hace dos semanas", LAST_2_WEEKS),
    ("it", "Cosa è successo oggi?", TODAY),
    ("it", "Di cosa abbiamo parlato ieri?", YESTERDAY),
    ("it", "cosa ho fatto l'altro ieri", DAY_BEFORE),
    ("it", "quando abbiamo parlato questa settimana?", THIS_WEEK),
    ("it", "cosa è successo la settimana scorsa", LAST_WEEK),
    ("it", "cosa è cambiato questo mese", THIS_MONTH),
    ("it", "quando si è rotto il mese scorso", LAST_MONTH),
    ("it", "cosa abbiamo fatto quest'anno", THIS_YEAR),
    ("it", "cosa abbiamo fatto l'anno scorso", LAST_YEAR),
    ("it", "cosa ho detto 3 giorni fa?", THREE_DAYS_AGO),
    ("it", "chi ha chiamato due settimane fa", TWO_WEEKS_AGO),
    ("it", "cosa abbiamo comprato 2 mesi fa", TWO_MONTHS_AGO),
    ("it", "cosa avevamo previsto a marzo?", MARCH),
    ("it", "quando ci siamo visti a gennaio?", JANUARY),
    ("it", "cosa è successo a dicembre 2024", DECEMBER_2024),
    ("it", "cosa abbiamo deciso venerdì scorso", LAST_FRIDAY),
    ("it", "cosa è successo il 2026-02-03?", ISO_DAY),
    ("it", "cosa ho fatto da lunedì?", SINCE_MONDAY),
    ("it", "cosa ho fatto da gennaio?", SINCE_JANUARY),
    ("it", "cosa è cambiato da ieri", SINCE_YESTERDAY),
    ("it", "cosa è successo negli ultimi 3 giorni?", LAST_3_DAYS),
    ("it", "di cosa parliamo da due settimane", LAST_2_WEEKS),
    ("pt", "O que aconteceu hoje?", TODAY),
    ("pt", "Sobre o que falamos ontem?", YESTERDAY),
    ("pt", "o que eu fiz anteontem", DAY_BEFORE),
    ("pt", "quando falamos esta semana?", THIS_WEEK),
    ("pt", "o que aconteceu na semana passada", LAST_WEEK),
    ("pt", "o que mudou este mês", THIS_MONTH),
    ("pt", "quando quebrou no mês passado", LAST_MONTH),
    ("pt", "o que fizemos este ano", THIS_YEAR),
    ("pt", "o que fizemos no ano passado", LAST_YEAR),
    ("pt", "o que eu disse há 3 dias?", THREE_DAYS_AGO),
    ("pt", "quem ligou duas semanas atrás", TWO_WEEKS_AGO),
    ("pt", "o que compramos há 2 meses", TWO_MONTHS_AGO),
    ("pt", "o que planejamos em março?", MARCH),
    ("pt", "quando nos vimos em janeiro?", JANUARY),
    ("pt", "o que aconteceu em dezembro 2024", DECEMBER_2024),
    ("pt", "o que decidimos sexta-feira passada", LAST_FRIDAY),
    ("pt", "o que aconteceu em 2026-02-03?", ISO_DAY),
    ("pt", "o que eu fiz desde segunda?", SINCE_MONDAY),
    ("pt", "o que eu fiz desde janeiro?", SINCE_JANUARY),
    ("pt", "o que mudou desde ontem", SINCE_YESTERDAY),
    ("pt", "o que aconteceu nos últimos 3 dias?", LAST_3_DAYS),
    ("pt", "o que aconteceu nas últimas duas semanas", LAST_2_WEEKS),
]


def _days(query: str) -> tuple[str | None, ...] | None:
    window = time_window(query, NOW)
    if window is None:
        return None
    return tuple(d.date().isoformat() if d else None for d in window)


@pytest.mark.parametrize(("lang", "query", "expected"), TABLE,
                         ids=[f"{lang}-{n}" for n, (lang, _, _) in enumerate(TABLE)])
def test_a_question_names_its_window(lang: str, query: str,
                                     expected: tuple[str | None, ...]) -> None:
    assert _days(query) == expected


def test_every_language_of_the_labelled_set_has_the_whole_table() -> None:
    labelled = {line.split("\t")[1] for name in ("intent_questions.tsv",
                                                 "intent_questions_heldout.tsv")
                for line in (DATA / name).read_text(encoding="utf-8").splitlines()
                if line and not line.startswith("#")}
    per_language = {lang: [e for lg, _, e in TABLE if lg == lang] for lang in labelled}
    assert labelled == set(LANGUAGES)
    english = per_language["en"][:22]          # the phrases every language reads
    for lang, windows in per_language.items():
        assert windows[:22] == english, lang


def test_the_last_n_days_is_open_ended_to_now() -> None:
    since, until = time_window("what happened in the last 3 days?", NOW) or (None, None)
    assert since == NOW - timedelta(days=3) and until is None
    since, until = time_window("was ist in den letzten 3 Tagen passiert?", NOW) or (None, None)
    assert since == NOW - timedelta(days=3) and until is None


@pytest.mark.parametrize("query", [
    "when did we talk about the budget?",
    "what happened on 2026-02-30?",                  # no such day
    "may I ask something",                           # a month name that is not a month
    "what is planned for March 3",                   # a date this reader does not read
    "what did we say on Monday",                     # the last Monday or the next one?
    "¿qué tengo el lunes?",
    "was ist am Montag",
    "Was ist hier passiert?",                        # German "here", not French "yesterday"
    "what is on next week",                          # the future: no window
    "what time is the standup tomorrow",
    "quand part le train pour Lyon ?",
    "Quando foi a última vez que falei com o Pedro?",
    "what happened on the weekend",
    "who did we meet this weekend",                  # "this week" inside a longer word
])
def test_a_question_naming_no_span_has_no_window(query: str) -> None:
    assert time_window(query, NOW) is None


def test_the_labelled_questions_get_only_the_windows_they_name() -> None:
    """Over the 251 labelled intent questions (six languages), a window only where the
    question names one, and the right one: never a wrong window read from other words."""
    found = {}
    for name in ("intent_questions.tsv", "intent_questions_heldout.tsv"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#"):
                question = line.split("\t")[2]
                if (days := _days(question)) is not None:
                    found[question] = days
    assert found == {
        "What have I been doing since January?": SINCE_JANUARY,
        "who was the doctor I saw in March": MARCH,
        "I'm feeling tired today": TODAY,
    }
