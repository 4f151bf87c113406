// The README's "Waiting" example for schedules, compiled and run by test/examples.test.ts.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { defineAgent, openRuntime } from "../src/index.js";

export const digest = defineAgent({
  name: "digest",
  version: "1",
  run: async (turn, input: { topic: string }) => {
    const items = await turn.model("fetch-news", { topic: input.topic }, async () => ["a", "b"]);
    // Each tick is its own run: chat `schedule-<id>`, input id `<id>@<tick time>`.
    return { topic: input.topic, items, tick: turn.inputId };
  },
});

export const scheduleExample = async (store: string) => {
  const runtime = await openRuntime({ store, agents: [digest] });
  // Declared at every start: the same schedule again writes nothing (`changed: false`).
  await runtime.schedules.upsert({
    id: "morning-digest",
    cron: "0 8 * * 1-5", // 08:00 on weekdays…
    timezone: "Europe/Berlin", // …in Berlin, daylight saving included
    agent: "digest",
    input: { topic: "holdfast" },
    overlap: "skip", // a tick while the last run is still going is skipped (and recorded)
    catchUp: "latest", // after downtime, run the most recent missed tick only
  });
  // A short one, to see ticks now: one run per tick, whichever runtime on this journal fires it.
  await runtime.schedules.upsert({
    id: "heartbeat",
    everyMs: 1_000,
    agent: "digest",
    input: { topic: "pulse" },
  });
  while (((await runtime.schedules.get("heartbeat"))?.ticks.admitted ?? 0) < 2)
    await new Promise((r) => setTimeout(r, 100));
  await runtime.schedules.pause("heartbeat", { by: "ops" }); // or `holdfast schedules pause heartbeat`
  const schedules = await runtime.schedules.list();
  const last = schedules.find((s) => s.scheduleId === "heartbeat")?.lastTick;
  const done = last?.runId ? await runtime.wait(last.runId) : null;
  await runtime.close();
  return {
    schedules: schedules.map((s) => ({ id: s.scheduleId, status: s.status, nextDueAt: s.nextDueAt })),
    lastTick: last,
    done,
  };
};

// `npx tsx examples/schedule.ts` runs it on a fresh journal in a temp folder and prints the result.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const store = join(mkdtempSync(join(tmpdir(), "holdfast-schedule-")), "journal.db");
  console.log(JSON.stringify(await scheduleExample(store), null, 2));
}
