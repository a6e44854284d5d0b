"""The API's request and response documents (pydantic), one module per family of resources."""
