-- is_job(id): the branded-id gate every script that takes a job id runs first.
local function is_job(id)
  return string.sub(id, 1, 3) == 'JOB'
end
local KIND_ERROR = 'EMQKIND job id must be JOB-namespaced'
