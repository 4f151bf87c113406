import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  defineAgent,
  defineTool,
  InvalidToolArgs,
  openRuntime,
  UnknownAgent,
  UnknownTool,
} from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const transfer = defineTool({
  name: "transfer",
  args: Schema.Struct({ account: Schema.String, amount: Schema.Number.pipe(Schema.positive()) }),
  run: async () => "moved",
});

const eventTypes = async (db: string) => {
  const journal = LibsqlJournal.open(db);
  const types = (await journal.readAll({ after: 0, limit: 1000 })).map((e) => e.event.type);
  await journal.close();
  return types;
};

describe("bad input", () => {
  it("tool arguments failing their Schema give InvalidToolArgs naming the field, and no intent is written", async () => {
    const dir = tempDir();
    const db = join(dir, "j.db");
    let caught: unknown;
    const agent = defineAgent({
      name: "payer",
      version: "1",
      run: async (turn) => {
        try {
          await turn.tool(transfer, { account: "acc-1", amount: -5 });
        } catch (error) {
          caught = error;
        }
        return "gave up";
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [transfer] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "payer", content: null });
    expect((await run.result).status).toBe("completed");
    await rt.close();
    expect(caught).toBeInstanceOf(InvalidToolArgs);
    expect((caught as InvalidToolArgs).fields).toEqual(["amount"]);
    expect((caught as InvalidToolArgs).message).toMatch(/amount/);
    expect(await eventTypes(db)).not.toContain("call.intended");
  });

  it("an unknown agent is refused with the registered names, writing nothing", async () => {
    const db = join(tempDir(), "j.db");
    const rt = await openRuntime({
      store: db,
      agents: [defineAgent({ name: "real", version: "1", run: async () => 1 })],
    });
    const refused = rt.submit({ chatId: "c", inputId: "i", agent: "imaginary", content: null });
    await expect(refused).rejects.toBeInstanceOf(UnknownAgent);
    await expect(refused).rejects.toThrow(/imaginary.*real/);
    await rt.close();
    expect(await eventTypes(db)).toEqual([]);
  });

  it("an unknown tool is refused before any intent is written", async () => {
    const db = join(tempDir(), "j.db");
    let caught: unknown;
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => {
        try {
          await turn.tool("teleport", {});
        } catch (error) {
          caught = error;
        }
        return null;
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [transfer] });
    await (await rt.submit({ chatId: "c", inputId: "i", agent: "a", content: null })).result;
    await rt.close();
    expect(caught).toBeInstanceOf(UnknownTool);
    expect((caught as UnknownTool).message).toMatch(/teleport.*transfer/);
    expect(await eventTypes(db)).not.toContain("call.intended");
  });

  it("content that cannot be stored as JSON is refused before admission", async () => {
    const db = join(tempDir(), "j.db");
    const rt = await openRuntime({
      store: db,
      agents: [defineAgent({ name: "a", version: "1", run: async () => 1 })],
    });
    await expect(rt.submit({ chatId: "c", inputId: "i", agent: "a", content: { n: 10n } })).rejects.toThrow(
      /content is invalid/,
    );
    await expect(rt.submit({ chatId: " ", inputId: "i", agent: "a", content: 1 })).rejects.toThrow(/chatId/);
    await rt.close();
    expect(await eventTypes(db)).toEqual([]);
  });
});
