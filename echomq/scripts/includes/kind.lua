-- is_job(id): the branded-id gate every script that takes a job id runs first.
local function is_job(id)
  return string.sub(id, 1, 3) == 'JOB'
end
local KIND_ERROR = 'EMQKIND job id must be JOB-namespaced'
-- all_jobs(first, stride): true when every id in ARGV[first], ARGV[first + stride], ...
-- is JOB-namespaced (the bulk scripts check all before their first write).
local function all_jobs(first, stride)
  for i = first, #ARGV, stride do
    if not is_job(ARGV[i]) then return false end
  end
  return true
end
