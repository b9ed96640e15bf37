"""Reading keys from the person's terminal as xterm and tmux mean them.

Without the kitty keyboard protocol (tmux, most terminals over SSH) a terminal sends
alt/meta+key as ESC followed by the key's own bytes: alt+. is ESC ., alt+enter ESC CR,
ctrl+alt+a ESC ^A. Textual's parser reads many of those as something else (alt+b as
ctrl+left, alt+0 as the macOS Option character º, alt+tab as shift+tab, alt+. as a bare
`.`), and two of them in one read as `^` plus the keys. `KeyParser` reads ESC + one
character as alt + that character's key, and leaves every other sequence (CSI and SS3
keys, mouse reports, pastes, focus and resize reports) to Textual's parser.

ESC [ and ESC O begin sequences; they are alt+[ and alt+O only when nothing follows
within the escape delay, as tmux's escape-time decides, or when what follows cannot end
a sequence. A lone ESC at the end of a read waits the same delay for the rest of its
sequence. CSI 1;<mod> R is shift/ctrl/alt+F3 (Textual reads it as a cursor position
report, which the app, full-screen, never asks for).

`KeyDriver` is Textual's Linux driver with this parser.
"""

from __future__ import annotations

import os
import re
import selectors
from codecs import getincrementaldecoder
from collections.abc import Iterable, Iterator

from textual import constants, events
from textual._loop import loop_last
from textual._parser import ParseError, ParseTimeout, Read1
from textual._time import get_time
from textual._xterm_parser import BRACKETED_PASTE_END, BRACKETED_PASTE_START, XTermParser
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

ESC = "\x1b"
# A CSI sequence ends at its final byte; parameters and intermediates come before it.
_CSI_FINAL = range(0x40, 0x7F)
# An X10 mouse report: three raw bytes follow its CSI M, which Textual reads on.
_X10_MOUSE = "\x1b[M"
_MODIFIED_F3 = re.compile(r"\x1b\[1;\d+R")


def with_alt(name: str) -> str:
    """The Textual key name of alt + the key `name`, modifiers in Textual's order
    (alphabetical): "a" -> "alt+a", "A" -> "alt+shift+a", "ctrl+a" -> "alt+ctrl+a"."""
    if len(name) == 1 and name.isupper():
        return f"alt+shift+{name.lower()}"
    *modifiers, base = name.split("+")
    return "+".join([*sorted({*modifiers, "alt"}), base])


def _csi_end(data: str, start: int) -> int | None:
    """The index after the CSI sequence at data[start] (ESC [ ...), or None if `data`
    ends before its final byte."""
    for i in range(start + 2, len(data)):
        if ord(data[i]) in _CSI_FINAL:
            return i + 1
        if data[i] == ESC:
            return i  # not a sequence after all: ESC [ was alt+[
    return None


class KeyParser(XTermParser):
    def __init__(self, debug: bool = False) -> None:
        super().__init__(debug)
        self._pasting = False
        # The end of the last read, if it may be the start of a sequence: ESC, ESC [, ESC O.
        self._held = ""
        self._held_at = 0.0

    def feed(self, data: str) -> Iterable[Message]:
        if not data:  # end of input
            held, self._held = self._held, ""
            return [*self._alt_keys(held), *super().feed("")]
        data, self._held = self._held + data, ""
        return list(self._split(data))

    def tick(self) -> Iterable[Message]:
        if self._held and get_time() - self._held_at >= constants.ESCAPE_DELAY:
            held, self._held = self._held, ""
            yield from self._alt_keys(held)
        yield from super().tick()

    def _textual(self, data: str) -> Iterator[Message]:
        yield from super().feed(data)

    def _whole(self, sequence: str) -> Iterator[Message]:
        """A complete sequence to Textual's parser. One it does not know would make it
        wait for more and swallow the keys after it: it gives up on that one at once,
        and its characters are keys, alt + the first."""
        if _MODIFIED_F3.fullmatch(sequence):
            yield from (key.copy() for key in self._parse_extended_key(sequence) or ())
            return
        tokens = list(self._textual(sequence))
        if self._in_ground() or sequence == _X10_MOUSE:
            yield from tokens
            return
        # Its reissue would drop the alt: the keys are read here, as ESC + characters.
        self._awaiting = self._gen.throw(ParseTimeout())
        self._tokens.clear()
        yield from self._alt_keys(sequence)

    def _in_ground(self) -> bool:
        """Textual's parser is between tokens (not inside a sequence it is reading)."""
        awaiting = self._awaiting
        return isinstance(awaiting, Read1) and awaiting.timeout is None

    def _split(self, data: str) -> Iterator[Message]:
        i, n = 0, len(data)
        while i < n:
            if self._pasting:
                end = data.find(BRACKETED_PASTE_END, i)
                stop = n if end < 0 else end + len(BRACKETED_PASTE_END)
                self._pasting = end < 0
                yield from self._textual(data[i:stop])
                i = stop
                continue
            if not self._in_ground():
                # Inside a sequence Textual began (an X10 mouse report's payload, or one
                # split across reads): it reads on, one character at a time.
                yield from self._textual(data[i])
                i += 1
                continue
            at = data.find(ESC, i)
            if at < 0:
                yield from self._textual(data[i:])
                return
            if at > i:
                yield from self._textual(data[i:at])
                i = at
                continue
            after = data[i + 1 : i + 2]
            if after in ("", "[", "O") and i + 2 >= n:
                self._held, self._held_at = data[i:], get_time()
                return
            if after == "O":
                if ord(data[i + 2]) in _CSI_FINAL:  # SS3: one character follows
                    yield from self._whole(data[i : i + 3])
                    i += 3
                else:
                    yield from self._alt_keys(data[i : i + 2])
                    i += 2
            elif after == "[":
                csi_end = _csi_end(data, i)
                if csi_end is None:  # the rest comes in the next read
                    self._held, self._held_at = data[i:], get_time()
                    return
                if csi_end == i + 2:  # ESC [ ESC...: alt+[ typed before another key
                    yield from self._alt_keys(data[i : i + 2])
                else:
                    sequence = data[i:csi_end]
                    self._pasting = sequence == BRACKETED_PASTE_START
                    yield from self._whole(sequence)
                i = csi_end
            else:
                yield from self._alt_keys(data[i : i + 2])
                i += 2

    def _alt_keys(self, held: str) -> Iterator[events.Key]:
        """ESC + characters that are no sequence: alt + the first, the rest as typed."""
        if not held:
            return
        if held == ESC:
            yield events.Key("escape", ESC)
            return
        for key in self._sequence_to_key_events(held[1]):
            yield events.Key(with_alt(key.key), key.character)
        for character in held[2:]:
            yield from self._sequence_to_key_events(character)


class KeyDriver(LinuxDriver):
    """Textual's Linux driver reading keys with `KeyParser`; the loop is Textual's
    `LinuxDriver.run_input_thread`, which names its parser class inline."""

    def run_input_thread(self) -> None:
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        parser = KeyParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def process(ready: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            for last, (_key, mask) in loop_last(ready):
                if mask & selectors.EVENT_READ:
                    text = decode(os.read(self.fileno, 1024 * 4), final=final and last)
                    if not text:
                        break
                    for event in parser.feed(text):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(0.1))
            selector.unregister(self.fileno)
            process(selector.select(0.1), final=True)
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass
