import { promptAgent } from "./promptAgent.js";

export { secrets, tools } from "./promptAgent.js";
/** The same agent after a prompt change: the second model call's instruction differs. */
export const agents = [promptAgent("Polish it, and make it shorter")];
