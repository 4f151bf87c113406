import { runStreamId } from "../../../events/index.js";
import type { CallRow, RunRow } from "../../../projections/index.js";
import { RunNotFound } from "../../../runtime/errors.js";
import { eventLine, shortHash, summarizeEvent } from "../eventFormat.js";
import { withExistingJournal } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";

export interface ShowOptions {
  readonly db?: string;
  readonly json?: boolean;
}

/** `holdfast show <runId>`: the run, each call and whether its outcome is committed, its events. */
export const showCommand = async (runId: string, options: ShowOptions, io: Io): Promise<number> =>
  withExistingJournal(options.db, async (journal) => {
    const run = await journal.projection<RunRow>("runs", runId);
    if (!run) throw new RunNotFound({ runId });
    const calls = (await journal.projectionRows<CallRow>("calls"))
      .filter((call) => call.runId === runId)
      .toSorted((a, b) => a.seq - b.seq);
    const events = await journal.readStream(runStreamId(runId));

    if (options.json) {
      await io.out.json({ run, calls, events: events.map(eventLine) });
      return 0;
    }
    const { out } = io;
    await out.line(`run ${run.runId}  ${run.status}${run.needsAttention ? " (needs attention)" : ""}`);
    await out.lines([
      `  chat       ${run.chatId}`,
      `  input      ${run.inputId}`,
      `  agent      ${run.agent}`,
      `  admitted   ${run.admittedAt}`,
      `  updated    ${run.updatedAt}`,
      `  calls      ${run.calls}`,
      `  conflicts  ${run.conflicts}`,
    ]);
    if (run.heldReasons.length > 0) {
      await out.line();
      await out.line("held because");
      for (const reason of run.heldReasons) {
        await out.line(`  - ${reason.callId ? `${reason.callId} ` : ""}${reason.code}: ${reason.detail}`);
      }
    }
    await out.line();
    if (calls.length === 0) {
      await out.line("calls: none");
    } else {
      await out.line("calls");
      await out.line(
        table(
          ["seq", "kind", "name", "attempt", "status", "outcome"],
          calls.map((call) => [
            call.seq,
            call.kind,
            call.name,
            call.attempt,
            call.error ? `${call.status}: ${call.error.message}` : call.status,
            call.outcomeCommitted ? "committed" : "not committed",
          ]),
        ),
      );
    }
    await out.line();
    await out.line(`events (${runStreamId(runId)})`);
    for (const recorded of events) {
      await out.line(
        `  ${String(recorded.version).padStart(3)}  ${recorded.event.type.padEnd(22)} ${shortHash(recorded.hash)}  ${summarizeEvent(recorded.event)}`,
      );
    }
    return 0;
  });
