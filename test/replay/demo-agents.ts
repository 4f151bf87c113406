// The `holdfast demo` agent and tools, as a module `holdfast replay --agents` loads: the code that
// made the demo's journal. The tools' folder is never used: a replay starts no effect.

import { makeShellTool, makeWriteFileTool } from "../../src/adapters/integrations/tools/index.js";
import { DEMO_SECRET } from "../../src/adapters/surfaces/cli/commands/demo.js";
import { makeDemoAgent } from "../../src/adapters/surfaces/cli/demoAgent.js";
import { makeNotifyTool } from "../../src/adapters/surfaces/cli/notifyTool.js";

const work = "/nonexistent/holdfast-replay-work";
const writeFile = makeWriteFileTool(work);
const shell = makeShellTool(work);
const notify = makeNotifyTool(work);

export const tools = [writeFile, shell, notify];
export const agents = [makeDemoAgent({ writeFile, shell, notify }, DEMO_SECRET)];
export const secrets = { [DEMO_SECRET.name]: DEMO_SECRET.value };
