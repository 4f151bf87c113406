// prompt-v1's agents from a module that leaves a timer running, as a module with a client or a
// poller would: `holdfast replay` must still exit once its report is out.
setInterval(() => undefined, 1_000);

export { agents, secrets, tools } from "./prompt-v1.js";
