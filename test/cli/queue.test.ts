import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime, type RunHandle } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { runCli } from "./cliProcess.js";

const tempDir = useTempDir();

const refusing = defineTool({
  name: "refuse",
  args: Schema.Struct({}),
  run: async () => {
    throw new DefiniteFailure("refused", {});
  },
});
const agents = [
  defineAgent({ name: "holder", version: "1", run: async (turn) => turn.tool("refuse", {}) }),
  defineAgent({ name: "replier", version: "1", run: async (_turn, input: unknown) => input }),
];

/** A journal whose chat `c` has a held run and two inputs queued behind it. */
const givenHeldQueue = async () => {
  const db = join(tempDir(), "journal.db");
  const runtime = await openRuntime({ store: db, agents, tools: [refusing] });
  try {
    const held = (await runtime.submit({
      chatId: "c",
      inputId: "h1",
      agent: "holder",
      content: {},
    })) as RunHandle;
    await held.result;
    for (const inputId of ["m2", "m3"])
      await runtime.submit({
        chatId: "c",
        inputId,
        agent: "replier",
        content: { inputId },
        whenBusy: "queue",
      });
    return { db, heldRunId: held.runId };
  } finally {
    await runtime.close();
  }
};

describe("holdfast queue", () => {
  it("lists a chat's queued inputs in order and the held run they wait for", async () => {
    const { db, heldRunId } = await givenHeldQueue();
    const json = await runCli(["queue", "c", "--db", db, "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const queue = JSON.parse(json.stdout);
    expect(queue.items.map((i: { inputId: string; position: number }) => [i.inputId, i.position])).toEqual([
      ["m2", 1],
      ["m3", 2],
    ]);
    expect(queue.waitingFor).toMatchObject({ runId: heldRunId, status: "held" });

    const text = await runCli(["queue", "c", "--db", db]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(
      `chat c: 2 input(s) queued behind run ${heldRunId} — held: waiting for a decision`,
    );
    expect(text.stdout).toContain(`holdfast show ${heldRunId}`);

    const chat = await runCli(["show", "--chat", "c", "--db", db]);
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toContain(
      `queue: 2 input(s) waiting for run ${heldRunId} (held): m2, m3 — holdfast queue c`,
    );
    const chatJson = JSON.parse((await runCli(["show", "--chat", "c", "--db", db, "--json"])).stdout);
    expect(chatJson.queue.items).toHaveLength(2);
  });

  it("withdraws a pending input; again is a no-op that says so; an unknown input is refused", async () => {
    const { db } = await givenHeldQueue();
    const withdrawn = await runCli(["queue", "withdraw", "c", "m2", "--by", "ada", "--db", db, "--json"]);
    expect(withdrawn.code, withdrawn.stderr).toBe(0);
    expect(JSON.parse(withdrawn.stdout)).toMatchObject({
      chatId: "c",
      inputId: "m2",
      withdrawn: true,
      by: "ada",
    });
    const again = await runCli(["queue", "withdraw", "c", "m2", "--by", "ada", "--db", db]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("was withdrawn before, by ada; nothing to do");
    const unknown = await runCli(["queue", "withdraw", "c", "nope", "--by", "ada", "--db", db]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("chat c has no queued input nope; nothing was written");
    const listed = JSON.parse((await runCli(["queue", "c", "--db", db, "--json"])).stdout);
    expect(listed.items.map((i: { inputId: string }) => i.inputId)).toEqual(["m3"]);
  });

  it("refuses to withdraw an input already admitted, naming its run", async () => {
    const { db, heldRunId } = await givenHeldQueue();
    const runtime = await openRuntime({ store: db, agents, tools: [refusing] });
    try {
      const version = (await runtime.run(heldRunId))!.version;
      await runtime.decide(heldRunId, {
        decision: "stop",
        basedOnVersion: version,
        decidedBy: "ada",
        note: "no",
      });
      for (;;) {
        const queue = await runtime.queue("c");
        if (queue.items.length === 0 && queue.waitingFor === null) break;
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await runtime.close();
    }
    const refused = await runCli(["queue", "withdraw", "c", "m2", "--by", "ada", "--db", db]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /input m2 of chat c was already admitted as run \S+ and can no longer be withdrawn; nothing was written/,
    );
  });
});
