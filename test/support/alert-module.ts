/**
 * What `holdfast worker --module` loads in the alert tests: an agent whose one call throws without
 * proof (its run is held `indefinite-failure`), with a secret in its arguments and in `secrets`.
 */
import { Schema } from "effect";
import { defineAgent, defineTool } from "../../src/index.js";

export const ALERT_SECRET = "sk-live-7f3a9c2e1b5d4a8f6e0c";

const charge = defineTool({
  name: "charge",
  args: Schema.Struct({ apiKey: Schema.String }),
  run: async () => {
    throw new Error("connection reset after send");
  },
});

export const agents = [
  defineAgent({
    name: "billing",
    version: "3",
    run: async (turn) => turn.tool(charge, { apiKey: ALERT_SECRET }),
  }),
];
export const tools = [charge];
export const secrets = { BILLING_KEY: ALERT_SECRET };
