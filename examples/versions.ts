// The README's "Agent versions" example, compiled and run by test/examples.test.ts.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { defineAgent, openRuntime } from "../src/index.js";

// Yesterday's code: greets, sleeps, says goodbye.
export const greeterV1 = defineAgent({
  name: "greeter",
  version: "1",
  run: async (turn, input: { name: string }) => {
    const hello = await turn.model("hello", input, async () => `Hello, ${input.name}`);
    await turn.sleep(300);
    return { hello, bye: "Bye", by: "v1" };
  },
});

// Today's code: a different call sequence. Runs admitted by v1 never run it.
export const greeterV2 = defineAgent({
  name: "greeter",
  version: "2",
  run: async (turn, input: { name: string }) => {
    const hello = await turn.model("hello-v2", input, async () => `Hi ${input.name}!`);
    return { hello, by: "v2" };
  },
});

export const versionsExample = async (store: string) => {
  // Before the deploy: v1 admits a run, which parks in its sleep; the process goes away.
  const before = await openRuntime({ store, agents: [greeterV1] });
  const old = await before.submit({
    chatId: "ada",
    inputId: "m1",
    agent: "greeter",
    content: { name: "Ada" },
  });
  const parked = (await old.result).status; // "waiting"
  await before.close();

  // After the deploy: both versions side by side; the last registered (v2) is the newest.
  const runtime = await openRuntime({ store, agents: [greeterV1, greeterV2] });
  const fresh = await runtime.submit({
    chatId: "bob",
    inputId: "m1",
    agent: "greeter",
    content: { name: "Bob" },
  });
  // A submit may name a version (an unknown one is refused with the registered list).
  const pinned = await runtime.submit({
    chatId: "cy",
    inputId: "m1",
    agent: "greeter",
    agentVersion: "1",
    content: { name: "Cy" },
  });
  // The old run is woken when due and re-executes on v1, the version that admitted it.
  while ((await runtime.run(old.runId))?.status === "waiting") await new Promise((r) => setTimeout(r, 50));
  while ((await runtime.run(pinned.runId))?.status === "waiting") await new Promise((r) => setTimeout(r, 50));
  const result = {
    parked,
    old: { agent: (await runtime.run(old.runId))?.agent, done: await runtime.wait(old.runId) },
    fresh: { agent: (await runtime.run(fresh.runId))?.agent, done: await fresh.result },
    pinned: { agent: (await runtime.run(pinned.runId))?.agent, done: await runtime.wait(pinned.runId) },
  };
  await runtime.close();
  return result;
};

// `npx tsx examples/versions.ts` runs it on a fresh journal in a temp folder and prints the result.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const store = join(mkdtempSync(join(tmpdir(), "holdfast-versions-")), "journal.db");
  console.log(JSON.stringify(await versionsExample(store), null, 2));
}
