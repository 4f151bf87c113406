/**
 * The torture agent for `holdfast worker --module torture/worker-module.ts`: the same agents and
 * tools as the single-worker harness, placed by the environment (TORTURE_DIR, TORTURE_SERVER,
 * TORTURE_FAULTS: the fault kinds the agent plays, comma-separated).
 */
import { faultKindsFrom, makeTortureDefinitions } from "./definitions.js";

const dir = process.env.TORTURE_DIR;
const server = process.env.TORTURE_SERVER;
if (!dir || !server)
  throw new Error("torture/worker-module.ts needs TORTURE_DIR and TORTURE_SERVER in the environment");

export const { agents, tools } = makeTortureDefinitions({
  dir,
  server,
  kinds: faultKindsFrom(process.env.TORTURE_FAULTS),
});
