import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { defineAgent, JournalUnavailable, openRuntime } from "../../src/index.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { subscribe } from "../../src/runtime/subscribe.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("a subscription after a transient error", () => {
  it("F27: an event whose filter read fails (the store away) is delivered once the store answers, never skipped, and the subscription does not end", async () => {
    const db = join(tempDir(), "j.db");
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => turn.model("think", {}, async () => "thought"),
    });
    const rt = await openRuntime({ store: db, agents: [agent] });
    const run = await rt.submit({ chatId: "chat-1", inputId: "i", agent: "a", content: null });
    await run.result;
    await rt.close();

    const journal = LibsqlJournal.open(db);
    // The real journal, with its projection read failing once (a database that blinked).
    let failures = 1;
    const flaky = new Proxy(journal, {
      get(target, property, receiver) {
        if (property === "projection" && failures > 0) {
          return async () => {
            failures--;
            throw new JournalUnavailable({ location: db, reason: "the connection dropped", hint: "retry" });
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    }) as Journal;
    // call.intended carries no chatId: the chat filter reads the runs projection for it.
    const it = subscribe(flaky, { filter: { chatIds: ["chat-1"], types: ["call.intended"] } });
    // The store is away for the filter's read: the subscription waits it out (decision 0069) and
    // reads again from its cursor. Skipped, the event would never come: the journal holds no later one.
    const next = await Promise.race([
      it.next(),
      new Promise((resolve) => setTimeout(() => resolve({ value: "nothing within 5 s" }), 5_000)),
    ]);
    expect((next as IteratorResult<unknown>).value).toMatchObject({
      event: { type: "call.intended", callId: `${run.runId}/0` },
    });
    await it.return?.();
    await journal.close();
  });
});
