import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("a tool's own probe (what the intent records beside the arguments)", () => {
  it("is computed before the effect and stored, masked, in the intent; the arguments are stored as given", async () => {
    const seenBeforeEffect: string[] = [];
    const lookup = defineTool({
      name: "lookup",
      args: Schema.Struct({ key: Schema.String }),
      probe: ({ key }, { idempotencyKey }) => {
        seenBeforeEffect.push(key);
        return {
          server: "catalog",
          version: "3.1",
          idempotencyKey,
          apiKey: "sk-not-stored-anywhere-0123456789",
        };
      },
      run: async ({ key }) => {
        expect(seenBeforeEffect).toEqual([key]);
        return { key, value: 42 };
      },
    });
    const agent = defineAgent({
      name: "asker",
      version: "1",
      run: async (turn) => turn.tool(lookup, { key: "answer" }),
    });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent], tools: [lookup] });
    const run = await runtime.submit({ chatId: "c", inputId: "m", agent: "asker", content: null });
    expect(await run.result).toMatchObject({ status: "completed", output: { key: "answer", value: 42 } });
    const intent = (await runtime.events(run.runId)).find((e) => e.event.type === "call.intended")?.event;
    expect(intent).toMatchObject({
      name: "lookup",
      args: { key: "answer" },
      disposition: "hold",
      reconciler: null,
      probe: {
        server: "catalog",
        version: "3.1",
        idempotencyKey: `${run.runId}/0#1`,
        apiKey: "«secret:apiKey»",
      },
    });
    await runtime.close();
  });

  it("and a reconciler are refused together: the intent has one probe", () => {
    expect(() =>
      defineTool({
        name: "both",
        args: Schema.Struct({}),
        probe: () => ({ about: "x" }),
        reconciler: { name: "r", check: async () => ({ outcome: "unknown", evidence: null }) },
        run: async () => null,
      }),
    ).toThrow(/give it to the reconciler/);
  });
});
