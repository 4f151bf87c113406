import { promptAgent } from "./promptAgent.js";

export { secrets, tools } from "./promptAgent.js";
export const agents = [promptAgent("Polish it")];
