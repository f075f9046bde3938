"""torch's compile callbacks as compilekit uses them (compile/settings.around_compiles): the
order of start, end and the compiled call on this machine's torch.
`python3 dev/callback_check.py`"""

import torch
from torch._dynamo import callback

from compilekit.compile import settings

handler = callback.callback_handler
events = []
fn = torch.compile(lambda x: (x + 1).sin())
device = "cuda" if torch.cuda.is_available() else "cpu"
with settings.around_compiles(lambda: events.append("start"), lambda: events.append("end")):
    fn(torch.ones(3, device=device))
    events.append("ran")
print(torch.__version__, events, len(handler.start_callbacks), len(handler.end_callbacks))
