/**
 * What `holdfast worker --module` loads in the clock tests: one agent whose only call never ends
 * (the run stays in it for as long as its worker lives). The call writes `started <pid>` to the
 * witness file named in HF_WITNESS when it begins; it has no reconciler, so a run taken over in it
 * is held.
 */
import { appendFileSync } from "node:fs";
import { Schema } from "effect";
import { defineAgent, defineTool } from "../../src/index.js";

const witness = process.env.HF_WITNESS;
if (!witness) throw new Error("test/support/long-call-module.ts needs HF_WITNESS");

const longCall = defineTool({
  name: "long_call",
  args: Schema.Struct({}),
  run: async () => {
    appendFileSync(witness, `started ${process.pid}\n`);
    return new Promise<never>(() => undefined);
  },
});

export const agents = [
  defineAgent({
    name: "long",
    version: "1",
    run: async (turn) => turn.tool(longCall, {}),
  }),
];
export const tools = [longCall];
