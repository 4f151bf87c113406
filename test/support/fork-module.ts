/** The agents and tools of the fork tests (`holdfast fork --module`): five steps, each witnessed. */
import { appendFileSync } from "node:fs";
import * as Schema from "effect/Schema";
import { defineAgent, defineTool } from "../../src/index.js";

/** Appends `n` to the file `HF_WITNESS` names each time it runs: its effect, seen from outside. */
export const step = defineTool({
  name: "step",
  args: Schema.Struct({ n: Schema.Number }),
  run: async ({ n }: { n: number }) => {
    const witness = process.env.HF_WITNESS;
    if (witness) appendFileSync(witness, `${n}\n`);
    return { n, value: n * 10 };
  },
});

export const steps = defineAgent({
  name: "steps",
  version: "1",
  run: async (turn) => {
    const results: unknown[] = [];
    for (let n = 1; n <= 5; n++) results.push(await turn.tool("step", { n }));
    return { results };
  },
});

export const agents = [steps];
export const tools = [step];
