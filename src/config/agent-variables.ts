import { variable } from './variable.js';
import { int, text } from './variable-types.js';

// The agents' door (docs/agents.md): bounds of the sessions a tenant may hold, and the upstream's fields the composed
// tool reads (the spec shows neither the workflow's id nor its step field).

/** Read at every start. */
export const AGENT_VARIABLES = {
  AGENT_SESSIONS_PER_USER: variable(
    'agents (MCP)',
    int(1, 1000),
    20,
    'live agent sessions one end user may hold; past it, minting answers `409 agent_session_limit` (see `docs/agents.md`)',
  ),
  AGENT_SESSIONS_PER_TENANT: variable(
    'agents (MCP)',
    int(1, 1_000_000),
    5000,
    'live agent sessions one tenant may hold, all its users together (`409 agent_session_limit` past it)',
  ),
  AGENT_WORKFLOW_ID_FIELD: variable(
    'agents (MCP)',
    text(),
    'id',
    "the workflow's id in the upstream's answers (the spec does not show it), read by the tool `launchWorkflowAndWait`",
  ),
  AGENT_WORKFLOW_STEP_FIELD: variable(
    'agents (MCP)',
    text(),
    'step',
    "the workflow's step (`Create`, `Review`, `Sign`, `Archive`) in the upstream's answers (not shown by the spec), read by `launchWorkflowAndWait`",
  ),
} as const;
