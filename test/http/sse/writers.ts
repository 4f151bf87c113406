import { Schema } from "effect";
import { LibsqlJournal } from "../../../src/adapters/stores/libsql/LibsqlJournal.js";
import { defineAgent, defineTool, openRuntime } from "../../../src/index.js";
import { writeManyRuns } from "../../audit/manyRuns.js";

const echo = defineTool({ name: "echo", args: Schema.Struct({ n: Schema.Number }), run: async ({ n }) => n });
const echoes = defineAgent({
  name: "echoes",
  version: "1",
  run: async (turn, input: { calls: number }) => {
    for (let i = 0; i < input.calls; i++) await turn.tool(echo, { n: i });
    return input.calls;
  },
});

/**
 * A new journal holding `finished` completed runs of `calls` calls (`2 × calls + 2` events each:
 * `many-0`, …, over chats `chat-0` … `chat-49`) and then the run `many-open` (chat `chat-open`)
 * with a call in doubt (2 events), appended straight through the journal, one commit per run.
 */
export const journalWithRuns = async (store: string, finished: number, calls: number): Promise<void> => {
  const journal = LibsqlJournal.open(store);
  try {
    await writeManyRuns(journal, { finished, calls, chats: 50 });
  } finally {
    await journal.close();
  }
};

/**
 * Write `runs` runs of `calls` echo calls through a runtime of this process, all at once (each on
 * a chat of its own): `runs × (2 × calls + 2)` events, written by the real write path while a
 * server reading the same file streams them.
 */
export const writeLiveRuns = async (
  store: string,
  options: { readonly runs: number; readonly calls: number; readonly prefix: string },
): Promise<void> => {
  const runtime = await openRuntime({ store, agents: [echoes], tools: [echo], recovery: { onOpen: false } });
  try {
    const handles = await Promise.all(
      Array.from({ length: options.runs }, (_, n) =>
        runtime.submit({
          chatId: `${options.prefix}-${n}`,
          inputId: "m",
          agent: "echoes",
          content: { calls: options.calls },
        }),
      ),
    );
    const results = await Promise.all(handles.map((h) => h.result));
    const unfinished = results.filter((r) => r.status !== "completed");
    if (unfinished.length > 0) throw new Error(`${unfinished.length} live runs did not complete`);
  } finally {
    await runtime.close();
  }
};
