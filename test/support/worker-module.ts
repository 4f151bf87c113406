/**
 * What `holdfast worker --module` loads in the CLI tests: the recovery-table agent and its tools,
 * counted by the witness file named in HF_WITNESS.
 */
import { makeTableTools, tableAgent } from "./table-tools.js";

const witness = process.env.HF_WITNESS;
if (!witness) throw new Error("test/support/worker-module.ts needs HF_WITNESS");

export const agents = [tableAgent];
export const tools = makeTableTools(witness).all;
