"""Memory search: an index of the hive that agents and the person search within scope.

The public API is what this module exports (`__all__`); every submodule (store, write,
sources, embed, entry, fold, keeper, retention, tidy) is private to the package, and
the app and remote desks may not import one (tests/unit/test_import_contracts.py):

    from hive_core.memory import open_store, note, promote, entries_for

    with open_store(paths) as store:          # memory.db under the home; rebuilt from the
                                              # hive when new; reads office.toml's roster
        hits = store.search("parser timeout", caller="jim", scope="all", limit=10)
        # -> list[Hit]; Hit.id, Hit.score (higher is better), Hit.entry (an Entry)
        # scope: "own" (the caller's private notes, memory.md, archive), "office" (board,
        # tasks, triage, promoted knowledge, messages the caller sent or received), "all".
        # mode="keyword" (default), "semantic" or "hybrid" (Mode); the last two raise
        # SemanticUnavailable without the `semantic` extra (semantic_missing() names the
        # modules that are not there, SEMANTIC_HINT says how to install them; neither
        # loads the model). scope is a SearchScope. For the person (human),
        # "all" is every scope: agents' private memory too, each hit's owner says whose.
        store.search("", caller="jim", filters=Filters(tags=("task:t-1",), source="task"))
        # exact filters (tags, source, external_id) inside the query; with no text they
        # list what they admit, newest first
        # An empty, None or unknown caller raises CallerRefused before any query runs.

        store.apply(entries_for(paths, changed))  # the watcher: changed absolute paths
    index_files(paths, files, store=None)     # read changed sources into the index (the
                                              # CI-log cache's new run.json); their entries
        store.upsert(entry)                       # one Entry; replaces (source, external_id)
        store.delete_source_file(path)            # every entry that came from that file
        store.reindex()                           # re-read the whole hive; returns the count
                                                  # (store.refused: sources not read, why)
    # A damaged memory.db is rebuilt from the hive on open or by the query that meets
    # it (store.recovered says what was done). A store may be shared between threads.

    search(paths, "parser timeout", "jim", "all", 10, "semantic", tell=print)
        # store.search as "jim", the model's work done where it is kept: keyword in this
        # process; semantic and hybrid by the running office, which loads the model once
        # (with none running, here: `tell` hears that, and any wait for the office)

    note(paths, "jim", "text", store=None)   # append to agents/jim/memory/notes.md, index
                                              # it, return its Entry (ValueError if empty,
                                              # too big, or not an agent)
    promote(paths, entry_id, by, store=None)  # the manager or the person only (NotAllowed
                                              # otherwise): private entry -> promoted/<id>.json,
                                              # office scope; returns the promoted Entry
    forget(paths, entry_id, by, store=None)   # drop the entry from its hive file; private
    edit(paths, entry_id, by, text, store=None)  # memory by its owner only, office knowledge
                                              # by the manager or the person (NotAllowed)
    changeable(paths, store, entry_id, by)    # the Entry `by` may forget or edit (NotFound,
                                              # NotAllowed): checked before an editor opens
    chunks(markdown)                          # how a memory file splits into entries

`store` arguments are optional: pass an open store to reuse it, or one is opened and
closed for the call. Entry fields: source, external_id, owner (agent id or "office"),
scope ("own" | "office"), text, path (hive-relative file), created_at, updated_at,
tags, participants; `Entry.id` is stable across reindexes.

Trust boundary: scopes keep agents of the same OS user from reading each other's
private memory by mistake and keep provenance honest (the caller comes from the
office's authentication, never from an argument an agent picks in the CLI); they do
not stop a hostile process of the same user, which can read memory.db or the hive.
"""

from hive_core.memory.embed import INSTALL_HINT as SEMANTIC_HINT
from hive_core.memory.embed import SemanticUnavailable
from hive_core.memory.embed import missing as semantic_missing
from hive_core.memory.served import search
from hive_core.memory.sources import chunks, entries_for
from hive_core.memory.store import (
    CallerRefused,
    Changes,
    Entry,
    Filters,
    Hit,
    MemoryStore,
    MemoryStoreError,
    Mode,
    NotAllowed,
    NotFound,
    SearchScope,
    open_store,
)
from hive_core.memory.write import changeable, edit, forget, index_files, note, promote

__all__ = [
    "SEMANTIC_HINT",
    "CallerRefused",
    "Changes",
    "Entry",
    "Filters",
    "Hit",
    "MemoryStore",
    "MemoryStoreError",
    "Mode",
    "NotAllowed",
    "NotFound",
    "SearchScope",
    "SemanticUnavailable",
    "changeable",
    "chunks",
    "edit",
    "entries_for",
    "forget",
    "index_files",
    "note",
    "open_store",
    "promote",
    "search",
    "semantic_missing",
]
