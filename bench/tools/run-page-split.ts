import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as Schema from "effect/Schema";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { eventLine, summarizeEvent } from "../../src/adapters/surfaces/cli/eventFormat.js";
import { runPage } from "../../src/adapters/surfaces/http/pages.js";
import { RunView } from "../../src/adapters/surfaces/http/schemas.js";
import { runView, shownCalls } from "../../src/adapters/surfaces/http/views.js";
import { runStreamId } from "../../src/events/index.js";
import { contextOf, foldRun } from "../../src/machines/index.js";
import { LONG_RUN_ID, writeRunsFixture } from "../fixtures.js";

/**
 * Where a run page of 1,000 calls spends its time, in process (decision 0088): the parts every
 * request paid before (the whole stream read and decoded, folded, a line per event) and the request
 * as it is now (the stream kept per reader, a page of calls and events).
 *
 *   npx tsx bench/tools/run-page-split.ts [journal.db holding the bench's long-0]
 */
const path = process.argv[2] ?? join(mkdtempSync(join(tmpdir(), "run-page-")), "journal.db");
if (process.argv[2] === undefined)
  await writeRunsFixture(path, { runs: 2_000, heldEvery: 100, longRunCalls: 1_000 });
const journal = LibsqlJournal.open(path);
const session = { id: "s", csrf: "c", name: "ada", expiresAt: Date.now() + 60_000 };

const median = async (name: string, f: () => unknown): Promise<void> => {
  for (let i = 0; i < 10; i++) await f();
  const samples: number[] = [];
  for (let i = 0; i < 41; i++) {
    const started = performance.now();
    await f();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  process.stdout.write(`${name.padEnd(44)} ${samples[20]!.toFixed(2)} ms\n`);
};

try {
  const stream = runStreamId(LONG_RUN_ID);
  const events = await journal.readStream(stream);
  process.stdout.write(`${LONG_RUN_ID}: ${events.length} events\n`);
  await median("read and decode the whole stream", () => journal.readStream(stream));
  await median("fold it", () => contextOf(foldRun(events.map((e) => e.event))));
  await median("a line per event (payload encoded)", () =>
    events.map((e) => ({ ...eventLine(e), summary: summarizeEvent(e.event) })),
  );
  const all = await runView(journal, LONG_RUN_ID, undefined, { all: true });
  const whole = Schema.encodeSync(RunView)(all as never);
  await median("encode the whole view (Schema + JSON)", () =>
    JSON.stringify(Schema.encodeSync(RunView)(all as never)),
  );
  await median("render the whole page", async () => String(await runPage(all, session)));
  process.stdout.write(
    `whole: ${JSON.stringify(whole).length} bytes of JSON, ${String(await runPage(all, session)).length} of HTML\n`,
  );
  await median("runView, the newest page (stream kept)", () => runView(journal, LONG_RUN_ID));
  const view = await runView(journal, LONG_RUN_ID);
  const page = { ...view, calls: shownCalls(view) };
  await median("encode the page (Schema + JSON)", () =>
    JSON.stringify(Schema.encodeSync(RunView)(page as never)),
  );
  await median("render the page", async () => String(await runPage(view, session)));
  process.stdout.write(
    `page: ${JSON.stringify(Schema.encodeSync(RunView)(page as never)).length} bytes of JSON, ${String(await runPage(view, session)).length} of HTML\n`,
  );
} finally {
  await journal.close();
}
