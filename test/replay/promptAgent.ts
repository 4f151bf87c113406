// An agent for the replay tests: a model call whose prompt carries a secret, a tool that appends
// to a witness file (an effect anyone can see), then a second model call. `instruction` is what a
// team edits between two deploys; `extraCall` makes the code ask for one more call than recorded.
import { appendFileSync } from "node:fs";
import { Schema } from "effect";
import { defineAgent, defineTool } from "../../src/index.js";

export const SECRET = { name: "PROMPT_KEY", value: "sk-prompt-secret-9876" } as const;

/** Appends a line to the file named by HOLDFAST_REPLAY_WITNESS: proof that an effect ran. */
export const note = defineTool({
  name: "note",
  args: Schema.Struct({ line: Schema.String }),
  run: async ({ line }) => {
    appendFileSync(process.env.HOLDFAST_REPLAY_WITNESS ?? "witness.txt", `${line}\n`);
    return { written: line };
  },
});

export const promptAgent = (instruction: string, extraCall = false) =>
  defineAgent({
    name: "writer",
    version: "1",
    run: async (turn, input: { topic: string }) => {
      const draft = await turn.model(
        "draft",
        { prompt: `Write about ${input.topic}. Key: ${SECRET.value}` },
        async () => `a draft on ${input.topic}`,
      );
      await turn.tool(note, { line: draft });
      const final = await turn.model(
        "polish",
        { instruction, text: draft, key: SECRET.value },
        async () => `${draft}, polished`,
      );
      if (extraCall) await turn.tool(note, { line: "one more" });
      return final;
    },
  });

export const secrets = { [SECRET.name]: SECRET.value };
export const tools = [note];
