import { decodeRow, EventDecodeError, isSealed, type Keyring } from "../../../events/index.js";
import { get, type Program } from "./program.js";
import { type EventRow, toStored } from "./rows.js";
import type { Statements } from "./statements.js";

/**
 * At open, prove the configured keys can read this journal before anything is written: the first
 * event written with sealed fields and the newest event must open. A journal with sealed events and
 * no key, or the wrong key, fails here with the event it could not read (`EventDecryptError`), so
 * a process never starts writing under a key nobody can read next to events it cannot read.
 * A row that does not decode for any other reason is left to recovery and the audit (law 11).
 */
export function* keyCheckProgram(sql: Statements, ring: Keyring | null): Program<void> {
  const since = yield* get<{ value: string }>(sql.sealedSince, []);
  if (!since) return;
  const first = yield* get<EventRow>(sql.eventFrom, [Number(since.value)]);
  const last = yield* get<EventRow>(sql.lastEvent, []);
  for (const row of [first, last]) {
    if (!row) continue;
    const stored = toStored(row);
    let data: unknown;
    try {
      data = JSON.parse(stored.data);
    } catch {
      continue;
    }
    if (!isSealed(data)) continue;
    try {
      decodeRow(stored, ring);
    } catch (error) {
      if (!(error instanceof EventDecodeError)) throw error;
    }
  }
}
