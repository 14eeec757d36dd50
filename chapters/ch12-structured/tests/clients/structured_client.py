"""Chapter 12's server through the official `openai` package, unchanged: response_format
(json_object, json_schema, a pydantic model) and tools, whole and streamed.

usage: python structured_client.py BASE_URL MODEL
Prints one line per check, "ok NAME" or raises; exits non-zero on the first failure.
"""

import json
import sys

import openai
import pydantic

base, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=120)


def ok(name):
    print("ok", name, flush=True)


class Person(pydantic.BaseModel):
    name: str
    age: int


def ask(content, **kw):
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}],
        temperature=0, seed=1, **kw)


person_format = {"type": "json_schema", "json_schema": {
    "name": "person", "strict": True, "schema": Person.model_json_schema()}}

# A json_schema answer, whole: it parses and validates.
whole = ask("Describe Ada Lovelace: her name and her age.", max_tokens=48,
            response_format=person_format)
text = whole.choices[0].message.content
Person.model_validate_json(text)
ok("json_schema whole: " + text.replace("\n", " "))

# The same request streamed: the same text.
chunks = ask("Describe Ada Lovelace: her name and her age.", max_tokens=48,
             response_format=person_format, stream=True)
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert streamed == text, (streamed, text)
ok("json_schema streamed")

# json_object: any JSON object.
obj = ask("Give me a JSON object about Paris.", max_tokens=32,
          response_format={"type": "json_object"})
assert isinstance(json.loads(obj.choices[0].message.content), dict), obj
ok("json_object")


# A recursive schema (a node whose children are nodes): an answer, and the server stays up.
tree = {"type": "json_schema", "json_schema": {"name": "tree", "schema": {
    "$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
        "required": ["name", "children"]}}}}}
node = json.loads(ask("A family tree as JSON.", max_tokens=40,
                      response_format=tree).choices[0].message.content)
assert isinstance(node["name"], str) and isinstance(node["children"], list), node
ok(f"recursive schema: {node}")

# The client's own parse() with pydantic models, one with a nested model ($defs, $ref).
class City(pydantic.BaseModel):
    name: str
    country: str


class Trip(pydantic.BaseModel):
    traveller: str
    to: City


for fmt, prompt in [(Person, "Reply with the name Ada and the age 36."),
                    (Trip, "Ada travels to Paris, France. Reply as JSON.")]:
    parsed = client.chat.completions.parse(
        model=model, messages=[{"role": "user", "content": prompt}],
        response_format=fmt, max_tokens=64, temperature=0)
    got = parsed.choices[0].message.parsed
    assert isinstance(got, fmt), parsed
    ok(f"parse {fmt.__name__}: {got!r}")

# max_tokens ends a long answer: still a whole document, finish_reason "length".
animals = {"type": "json_schema", "json_schema": {"name": "animals", "schema": {
    "type": "object", "properties": {"animals": {"type": "array", "items": {"type": "string"}}},
    "required": ["animals"]}}}
for budget in (16, 24):
    cut = ask("List fifty animals as JSON.", max_tokens=budget, response_format=animals)
    assert cut.choices[0].finish_reason == "length", cut
    listed = json.loads(cut.choices[0].message.content)["animals"]
    assert all(isinstance(a, str) for a in listed), cut
    ok(f"cut at {budget} tokens, still JSON: {listed}")

# A keyword outside the subset: a 400 naming it and where it stands.
try:
    ask("x", max_tokens=8, response_format={"type": "json_schema", "json_schema": {
        "name": "p", "schema": {"type": "object", "properties": {
            "age": {"type": "integer", "minimum": 0}}}}})
    raise AssertionError("a schema with minimum was accepted")
except openai.BadRequestError as e:
    message = e.body["message"]
    assert "minimum" in message and "#/properties/age/minimum" in message, message
    ok("400: " + message)


class Weather(pydantic.BaseModel):
    city: str
    unit: str


tools = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city now.",
    "parameters": Weather.model_json_schema()}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The time in a city now.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"], "additionalProperties": False}}}]

# tool_choice "required": a call whose arguments validate.
call = ask("What is the weather in Paris, in celsius?", max_tokens=64, tools=tools,
           tool_choice="required")
choice = call.choices[0]
assert choice.finish_reason == "tool_calls" and choice.message.content is None, call
tc = choice.message.tool_calls[0]
assert tc.type == "function" and tc.id and tc.function.name in ("get_weather", "get_time"), tc
args = json.loads(tc.function.arguments)
if tc.function.name == "get_weather":
    Weather.model_validate(args)
else:
    assert isinstance(args["city"], str) and len(args) == 1, args
ok(f"tool call required: {tc.function.name}({tc.function.arguments!r})")

# A named function, streamed: the id and name first, then pieces of the arguments.
stream = ask("What is the weather in Paris, in celsius?", max_tokens=64, tools=tools,
             tool_choice={"type": "function", "function": {"name": "get_weather"}},
             stream=True)
name, ids, pieces, finish = None, [], [], None
for c in stream:
    if not c.choices:
        continue
    for d in c.choices[0].delta.tool_calls or []:
        assert d.index == 0, d
        if d.id:
            ids.append(d.id)
            name = d.function.name
        pieces.append(d.function.arguments or "")
    finish = c.choices[0].finish_reason or finish
assert name == "get_weather" and len(ids) == 1 and finish == "tool_calls", (name, ids, finish)
assert len([p for p in pieces if p]) > 1, pieces
Weather.model_validate_json("".join(pieces))
ok("tool call streamed in %d pieces: %s" % (len(pieces), "".join(pieces)))

print("all passed")
